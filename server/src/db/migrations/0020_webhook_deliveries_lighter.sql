-- Issue #11 bench (session 23): two costs of every delivery record the recorder writes.
-- 1. The foreign key to webhooks checked each record with a query of its own (9-10 % of the
--    recording statement's CPU). The recording statement now locks each of its records' webhooks
--    once (FOR KEY SHARE) and writes no record of a webhook that is gone; a webhook's records go
--    with it by the trigger below (also when a team's deletion cascades to its webhooks).
-- 2. The payload was jsonb: PostgreSQL parsed every body again (7 %). It is now the exact JSON
--    text that was signed and sent (the outbox row's body), read back parsed.
ALTER TABLE "webhook_deliveries" DROP CONSTRAINT "webhook_deliveries_webhook_id_webhooks_id_fk";--> statement-breakpoint
ALTER TABLE "webhook_deliveries" ALTER COLUMN "payload" SET DATA TYPE text;--> statement-breakpoint
CREATE FUNCTION "webhooks_delete_deliveries"() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  -- A statement of its own, so a fresh snapshot: it also sees the records a recording committed
  -- while this delete waited for that recording's lock on the webhook.
  DELETE FROM "webhook_deliveries" d USING "deleted_webhooks" w WHERE d."webhook_id" = w."id";
  RETURN NULL;
END
$$;--> statement-breakpoint
CREATE TRIGGER "webhooks_delete_deliveries" AFTER DELETE ON "webhooks" REFERENCING OLD TABLE AS "deleted_webhooks" FOR EACH STATEMENT EXECUTE FUNCTION "webhooks_delete_deliveries"();
