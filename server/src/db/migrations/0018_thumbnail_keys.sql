-- Template thumbnails are stored as storage keys from now on; their URL is built when read, with the
-- BASE_URL or S3_PUBLIC_URL set then (review finding newuser 2: a stored absolute URL broke when
-- either changed, and its file was never deleted). A row made before holds the URL of its render
-- time, `<BASE_URL>/files/<key>` (local storage) or `<S3 public base>/<key>` (S3): both end with the
-- key, `<team_id>/thumbnails/<template id>-<16 hex>.png`, which is kept. Other values stay as they
-- are (the server reads a URL ending with such a key the same way, and shows nothing for the rest).
UPDATE "templates" AS t
SET "thumbnail_url" = legacy."key"
FROM (
  SELECT "id", substring("thumbnail_url" from '/([^/?#]+/thumbnails/[A-Za-z0-9_]+-[0-9a-f]{16}\.png)$') AS "key"
  FROM "templates"
  WHERE "thumbnail_url" ~* '^https?://'
) AS legacy
WHERE t."id" = legacy."id" AND split_part(legacy."key", '/', 1) = t."team_id";
