CREATE TYPE "public"."recipient_kind" AS ENUM('to', 'cc', 'bcc');--> statement-breakpoint
CREATE TABLE "email_recipients" (
	"email_id" text NOT NULL,
	"team_id" text NOT NULL,
	"address" text NOT NULL,
	"kind" "recipient_kind" NOT NULL,
	"status" "email_status" NOT NULL,
	"bounce_type" text,
	"diagnostic" text,
	"sent_at" timestamp (3) with time zone,
	"delivered_at" timestamp (3) with time zone,
	"opened_at" timestamp (3) with time zone,
	"clicked_at" timestamp (3) with time zone,
	"bounced_at" timestamp (3) with time zone,
	"failed_at" timestamp (3) with time zone,
	"spam_at" timestamp (3) with time zone,
	"deferred_at" timestamp (3) with time zone,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "email_recipients_email_id_address_pk" PRIMARY KEY("email_id","address")
);
--> statement-breakpoint
ALTER TABLE "email_recipients" ADD CONSTRAINT "email_recipients_email_id_email_logs_id_fk" FOREIGN KEY ("email_id") REFERENCES "public"."email_logs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "email_recipients" ADD CONSTRAINT "email_recipients_team_id_teams_id_fk" FOREIGN KEY ("team_id") REFERENCES "public"."teams"("id") ON DELETE cascade ON UPDATE no action;