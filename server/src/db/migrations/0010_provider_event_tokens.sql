CREATE TABLE "provider_event_tokens" (
	"adapter_id" text NOT NULL,
	"token" text NOT NULL,
	"seen_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "provider_event_tokens_adapter_id_token_pk" PRIMARY KEY("adapter_id","token")
);
--> statement-breakpoint
ALTER TABLE "provider_event_tokens" ADD CONSTRAINT "provider_event_tokens_adapter_id_adapters_id_fk" FOREIGN KEY ("adapter_id") REFERENCES "public"."adapters"("id") ON DELETE cascade ON UPDATE no action;