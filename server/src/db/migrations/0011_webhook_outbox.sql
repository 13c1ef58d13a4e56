CREATE TABLE "webhook_outbox" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "webhook_outbox_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"webhook_id" text NOT NULL,
	"message_id" text NOT NULL,
	"event" text NOT NULL,
	"body" text NOT NULL,
	"attempt" integer DEFAULT 1 NOT NULL,
	"claims" integer DEFAULT 0 NOT NULL,
	"due_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"leased_until" timestamp (3) with time zone,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL
) WITH (fillfactor = 50);
--> statement-breakpoint
ALTER TABLE "webhook_outbox" ADD CONSTRAINT "webhook_outbox_webhook_id_webhooks_id_fk" FOREIGN KEY ("webhook_id") REFERENCES "public"."webhooks"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "webhook_outbox_due_idx" ON "webhook_outbox" USING btree ("due_at");--> statement-breakpoint
-- Attempts queued as pg-boss `webhook.deliver` jobs before the outbox (issue #11) move into it, due
-- when their job was (an active one at once: its worker is being replaced); their jobs leave.
DO $$
BEGIN
  IF to_regclass('pgboss.job') IS NOT NULL THEN
    INSERT INTO "webhook_outbox" ("webhook_id", "message_id", "event", "body", "attempt", "due_at")
    SELECT j.data ->> 'webhookId', j.data ->> 'messageId', j.data ->> 'event', (j.data -> 'payload')::text,
      coalesce((j.data ->> 'attempt')::integer, 1),
      CASE WHEN j.state::text = 'active' THEN now() ELSE j.start_after END
    FROM pgboss.job j JOIN "webhooks" w ON w.id = j.data ->> 'webhookId'
    WHERE j.name = 'webhook.deliver' AND j.state::text IN ('created', 'retry', 'active')
      AND j.data ->> 'messageId' IS NOT NULL AND j.data ->> 'event' IS NOT NULL AND j.data ? 'payload';
    DELETE FROM pgboss.job WHERE name = 'webhook.deliver';
  END IF;
END $$;
