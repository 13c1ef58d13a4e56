ALTER TABLE "email_send_options" ADD COLUMN "track_opens" boolean;--> statement-breakpoint
ALTER TABLE "email_send_options" ADD COLUMN "track_clicks" boolean;--> statement-breakpoint
ALTER TABLE "template_versions" ADD COLUMN "track_opens" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "template_versions" ADD COLUMN "track_clicks" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "templates" ADD COLUMN "track_opens" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "templates" ADD COLUMN "track_clicks" boolean DEFAULT false NOT NULL;