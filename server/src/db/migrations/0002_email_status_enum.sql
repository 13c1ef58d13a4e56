CREATE TYPE "public"."email_status" AS ENUM('queued', 'sent', 'delivered', 'opened', 'clicked', 'bounced', 'failed', 'spam');--> statement-breakpoint
ALTER TABLE "email_events" ALTER COLUMN "status" SET DATA TYPE "public"."email_status" USING "status"::"public"."email_status";--> statement-breakpoint
ALTER TABLE "email_logs" ALTER COLUMN "status" SET DATA TYPE "public"."email_status" USING "status"::"public"."email_status";--> statement-breakpoint
CREATE INDEX "email_logs_provider_message_id_idx" ON "email_logs" USING btree ("provider_message_id");