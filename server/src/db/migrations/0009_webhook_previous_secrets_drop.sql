ALTER TABLE "webhooks" DROP COLUMN "previous_secret_encrypted";--> statement-breakpoint
ALTER TABLE "webhooks" DROP COLUMN "previous_secret_expires_at";