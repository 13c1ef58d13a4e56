ALTER TABLE "webhook_outbox" ADD COLUMN "team_id" text;--> statement-breakpoint
UPDATE "webhook_outbox" o SET "team_id" = w."team_id" FROM "webhooks" w WHERE w."id" = o."webhook_id";
