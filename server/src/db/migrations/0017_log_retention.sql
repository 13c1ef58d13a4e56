CREATE INDEX "email_logs_template_id_idx" ON "email_logs" USING btree ("template_id");--> statement-breakpoint
CREATE INDEX "provider_event_tokens_seen_at_idx" ON "provider_event_tokens" USING btree ("seen_at");--> statement-breakpoint
CREATE INDEX "sessions_expires_at_idx" ON "sessions" USING btree ("expires_at");