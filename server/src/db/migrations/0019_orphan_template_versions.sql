-- The maintenance loop deletes the versions of deleted templates that no email log names any more
-- (review finding diff19 1: once retention pruned the logs naming them, or for a template deleted
-- before this release, they stayed for good). Both indexes are partial: only rows of deleted
-- templates are in them, so a send's log insert does not write them.
CREATE INDEX "email_logs_orphan_version_idx" ON "email_logs" USING btree ("template_version_id") WHERE "email_logs"."template_id" is null;--> statement-breakpoint
CREATE INDEX "template_versions_orphan_idx" ON "template_versions" USING btree ("id") WHERE "template_versions"."template_id" is null;