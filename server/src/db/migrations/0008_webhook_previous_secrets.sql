ALTER TABLE "webhooks" ADD COLUMN "previous_secrets" jsonb DEFAULT '[]'::jsonb NOT NULL;--> statement-breakpoint
UPDATE "webhooks" SET "previous_secrets" = jsonb_build_array(jsonb_build_object(
  'secret', "previous_secret_encrypted",
  'expiresAt', to_char("previous_secret_expires_at" AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')))
WHERE "previous_secret_encrypted" IS NOT NULL AND "previous_secret_expires_at" > now();
