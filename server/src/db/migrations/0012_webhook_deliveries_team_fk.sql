-- Issue #11: a delivery record's team is its webhook's, and the webhook's foreign key already
-- cascades a team's deletion to its records; the team key was a second lookup on every insert.
ALTER TABLE "webhook_deliveries" DROP CONSTRAINT IF EXISTS "webhook_deliveries_team_id_teams_id_fk";
