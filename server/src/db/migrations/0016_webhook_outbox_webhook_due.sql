CREATE INDEX "webhook_outbox_webhook_due_idx" ON "webhook_outbox" USING btree ("webhook_id","due_at");--> statement-breakpoint
-- The claim webhook by webhook looks up each webhook's due rows by a value the planner does not
-- know (a generic plan): it estimates 1 / n_distinct(webhook_id) of the table per webhook. With a
-- few webhooks in the outbox, one of them with a large backlog, that made the scan in due order
-- (webhook_outbox_due_idx, filtering by webhook) look cheaper than this index, and it read the
-- whole backlog again on every claim. Postwright's outbox holds the rows of many webhooks.
ALTER TABLE "webhook_outbox" ALTER COLUMN "webhook_id" SET (n_distinct = 1000);
