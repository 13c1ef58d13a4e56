import { sql } from 'drizzle-orm';
import {
  type AnyPgColumn,
  bigint,
  boolean,
  customType,
  index,
  integer,
  jsonb,
  pgEnum,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
} from 'drizzle-orm/pg-core';
import { teams, users } from './auth.ts';

/** Team-owned resources of the spec ("Resources and their fields"). Every row carries team_id. */
const ts = (name: string) => timestamp(name, { withTimezone: true, precision: 3, mode: 'date' });
const teamId = () =>
  text('team_id')
    .notNull()
    .references(() => teams.id, { onDelete: 'cascade' });

export const apiKeys = pgTable(
  'api_keys',
  {
    id: text('id').primaryKey(),
    teamId: teamId(),
    name: text('name').notNull(),
    keyHash: text('key_hash').notNull().unique(),
    keyPrefix: text('key_prefix').notNull(),
    scopes: text('scopes').array().notNull(),
    rateLimit: integer('rate_limit').notNull(),
    expiresAt: ts('expires_at'),
    lastUsedAt: ts('last_used_at'),
    isActive: boolean('is_active').notNull().default(true),
    createdBy: text('created_by').references(() => users.id, { onDelete: 'set null' }),
    createdAt: ts('created_at').notNull().defaultNow(),
    updatedAt: ts('updated_at').notNull().defaultNow(),
  },
  (t) => [index('api_keys_team_id_idx').on(t.teamId)],
);

export const adapters = pgTable(
  'adapters',
  {
    id: text('id').primaryKey(),
    teamId: teamId(),
    name: text('name').notNull(),
    type: text('type').notNull(),
    /** AES-256-GCM ciphertext of the JSON config (see modules/adapters). */
    configEncrypted: text('config_encrypted').notNull(),
    defaultFrom: text('default_from'),
    isDefault: boolean('is_default').notNull().default(false),
    isActive: boolean('is_active').notNull().default(true),
    /**
     * The adapter of the same team tried when this one fails for a retryable reason after its last
     * retry (issue #10); no cycles (checked by the adapters module). Cleared when that one is deleted.
     */
    fallbackAdapterId: text('fallback_adapter_id').references((): AnyPgColumn => adapters.id, {
      onDelete: 'set null',
    }),
    createdAt: ts('created_at').notNull().defaultNow(),
    updatedAt: ts('updated_at').notNull().defaultNow(),
  },
  (t) => [
    index('adapters_team_id_idx').on(t.teamId),
    uniqueIndex('adapters_one_default_per_team').on(t.teamId).where(sql`${t.isDefault}`),
  ],
);

export const templates = pgTable(
  'templates',
  {
    id: text('id').primaryKey(),
    teamId: teamId(),
    name: text('name').notNull(),
    slug: text('slug').notNull(),
    description: text('description').notNull().default(''),
    subject: text('subject').notNull(),
    designJson: jsonb('design_json').notNull(),
    compiledHtml: text('compiled_html').notNull(),
    variables: text('variables').array().notNull(),
    /**
     * The template's thumbnail as a storage key (`<teamId>/thumbnails/<templateId>-<hash>.png`), ''
     * for none; the API's `thumbnailUrl` is built from it when read (templates.thumbnail.ts). The
     * column keeps its old name: it held the absolute URL until migration 0018, which was broken by
     * a change of BASE_URL or S3_PUBLIC_URL (review finding newuser 2); a process of an older
     * release may still write such a URL during an upgrade, and readers map it back to its key.
     */
    thumbnailKey: text('thumbnail_url').notNull().default(''),
    currentVersionId: text('current_version_id'),
    /** True when content changed since currentVersionId was snapshotted. */
    hasUnversionedChanges: boolean('has_unversioned_changes').notNull().default(false),
    isActive: boolean('is_active').notNull().default(true),
    generatePdf: boolean('generate_pdf').notNull().default(false),
    pdfFilename: text('pdf_filename'),
    /** Built-in open tracking (issue #11): a 1×1 pixel appended to the HTML at send. */
    trackOpens: boolean('track_opens').notNull().default(false),
    /** Built-in click tracking (issue #11): http(s) links rewritten to signed redirects at send. */
    trackClicks: boolean('track_clicks').notNull().default(false),
    createdBy: text('created_by').references(() => users.id, { onDelete: 'set null' }),
    createdAt: ts('created_at').notNull().defaultNow(),
    updatedAt: ts('updated_at').notNull().defaultNow(),
  },
  (t) => [uniqueIndex('templates_team_slug_idx').on(t.teamId, t.slug)],
);

/**
 * Immutable snapshots. Deleting a template deletes its versions that no email log names; the ones a
 * log names are kept (template_id set null) so the log can be re-rendered (templates.repository.ts),
 * until no log names them: the maintenance loop then deletes them (modules/maintenance).
 */
export const templateVersions = pgTable(
  'template_versions',
  {
    id: text('id').primaryKey(),
    teamId: teamId(),
    templateId: text('template_id').references(() => templates.id, { onDelete: 'set null' }),
    number: integer('number').notNull(),
    name: text('name').notNull(),
    templateName: text('template_name').notNull(),
    subject: text('subject').notNull(),
    designJson: jsonb('design_json').notNull(),
    generatePdf: boolean('generate_pdf').notNull().default(false),
    pdfFilename: text('pdf_filename'),
    trackOpens: boolean('track_opens').notNull().default(false),
    trackClicks: boolean('track_clicks').notNull().default(false),
    createdBy: text('created_by').references(() => users.id, { onDelete: 'set null' }),
    createdAt: ts('created_at').notNull().defaultNow(),
  },
  (t) => [
    index('template_versions_template_id_idx').on(t.templateId, t.number),
    // The maintenance loop's walk over the versions of deleted templates, in id order, for the ones
    // no log names any more (maintenance.repository.ts deleteOrphanedTemplateVersions). Partial: a
    // live template's versions are not in it.
    index('template_versions_orphan_idx').on(t.id).where(sql`${t.templateId} is null`),
  ],
);

/**
 * An email's delivery status (spec "States and transitions"); the database refuses any other value.
 * The transitions between them are modules/emails/email-status.ts's.
 */
export const emailStatus = pgEnum('email_status', [
  'queued',
  'sent',
  'delivered',
  'opened',
  'clicked',
  'bounced',
  'failed',
  'spam',
]);

export const emailLogs = pgTable(
  'email_logs',
  {
    id: text('id').primaryKey(),
    teamId: teamId(),
    templateId: text('template_id').references(() => templates.id, { onDelete: 'set null' }),
    templateName: text('template_name').notNull(),
    templateVersionId: text('template_version_id').notNull(),
    adapterId: text('adapter_id').notNull(),
    apiKeyId: text('api_key_id'),
    toAddresses: text('to_addresses').array().notNull(),
    fromAddress: text('from_address').notNull(),
    subject: text('subject').notNull(),
    variables: jsonb('variables').notNull(),
    status: emailStatus('status').notNull(),
    providerMessageId: text('provider_message_id'),
    errorMessage: text('error_message'),
    hasPdfAttachment: boolean('has_pdf_attachment').notNull().default(false),
    jobId: text('job_id').notNull(),
    attemptCount: integer('attempt_count').notNull().default(0),
    createdAt: ts('created_at').notNull().defaultNow(),
    updatedAt: ts('updated_at').notNull().defaultNow(),
    sentAt: ts('sent_at'),
    deliveredAt: ts('delivered_at'),
    openedAt: ts('opened_at'),
    clickedAt: ts('clicked_at'),
    bouncedAt: ts('bounced_at'),
    failedAt: ts('failed_at'),
    spamAt: ts('spam_at'),
  },
  (t) => [
    index('email_logs_team_created_idx').on(t.teamId, t.createdAt),
    index('email_logs_team_status_idx').on(t.teamId, t.status),
    // A template's delete: its foreign key's ON DELETE SET NULL finds the template's logs, and the
    // delete keeps the versions they name (templates.repository.ts).
    index('email_logs_template_id_idx').on(t.templateId),
    // Whether a log still names a version of a deleted template (the maintenance loop deletes the
    // ones none names). Partial: only logs of deleted templates are in it, so a send, whose log has
    // its template set, does not write it.
    index('email_logs_orphan_version_idx').on(t.templateVersionId).where(sql`${t.templateId} is null`),
    // Provider events (bounces, deliveries) name the email by the provider's message id.
    index('email_logs_provider_message_id_idx').on(t.providerMessageId),
  ],
);

/** Every status change of an email, including ones that did not move `status` forward. */
export const emailEvents = pgTable(
  'email_events',
  {
    id: text('id').primaryKey(),
    teamId: teamId(),
    emailId: text('email_id')
      .notNull()
      .references(() => emailLogs.id, { onDelete: 'cascade' }),
    status: emailStatus('status').notNull(),
    detail: jsonb('detail').notNull().default({}),
    occurredAt: ts('occurred_at').notNull().defaultNow(),
  },
  (t) => [index('email_events_email_id_idx').on(t.emailId, t.occurredAt)],
);

/** How a recipient was addressed (issue #11 "Outcomes per recipient"). */
export const recipientKind = pgEnum('recipient_kind', ['to', 'cc', 'bcc']);

/**
 * What happened to one recipient of an email (issue #11 "Outcomes per recipient"), written only
 * once something recipient-specific happened (a refused RCPT, a provider event naming the address):
 * a recipient without a row has the state its email implies (modules/emails/email-recipients.ts).
 * `address` is the bare lower-cased address (the suppression list's key); `status` uses the email
 * statuses and moves forward only; `bounceType` is `hard` or `soft`; `deferredAt` is the last
 * deferral (the provider keeps trying).
 */
export const emailRecipients = pgTable(
  'email_recipients',
  {
    emailId: text('email_id')
      .notNull()
      .references(() => emailLogs.id, { onDelete: 'cascade' }),
    teamId: teamId(),
    address: text('address').notNull(),
    kind: recipientKind('kind').notNull(),
    status: emailStatus('status').notNull(),
    bounceType: text('bounce_type'),
    diagnostic: text('diagnostic'),
    sentAt: ts('sent_at'),
    deliveredAt: ts('delivered_at'),
    openedAt: ts('opened_at'),
    clickedAt: ts('clicked_at'),
    bouncedAt: ts('bounced_at'),
    failedAt: ts('failed_at'),
    spamAt: ts('spam_at'),
    deferredAt: ts('deferred_at'),
    updatedAt: ts('updated_at').notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.emailId, t.address] })],
);

/**
 * Outbound webhook endpoints (issue #11). The signing secret (`whsec_…`) is stored AES-256-GCM
 * encrypted like adapter configs; after a rotation the previous one keeps signing until
 * `previousSecretExpiresAt`. `failingSince` is the first failed attempt since the last success
 * (the 5-day auto-disable rule reads it).
 */
export const webhooks = pgTable(
  'webhooks',
  {
    id: text('id').primaryKey(),
    teamId: teamId(),
    name: text('name').notNull(),
    url: text('url').notNull(),
    events: text('events').array().notNull(),
    // Column `secret` holds the ciphertext (v2:iv:tag:data), never the plain secret.
    secretEncrypted: text('secret').notNull(),
    /**
     * Secrets rotated out that still sign until `expiresAt` (issue #11: 24 h after their
     * rotation), each as its ciphertext; several when a webhook was rotated again within 24 h.
     */
    previousSecrets: jsonb('previous_secrets')
      .$type<{ secret: string; expiresAt: string }[]>()
      .notNull()
      .default([]),
    isActive: boolean('is_active').notNull().default(true),
    disabledReason: text('disabled_reason'),
    lastTriggeredAt: ts('last_triggered_at'),
    lastSuccessAt: ts('last_success_at'),
    consecutiveFailures: integer('consecutive_failures').notNull().default(0),
    failingSince: ts('failing_since'),
    createdAt: ts('created_at').notNull().defaultNow(),
    updatedAt: ts('updated_at').notNull().defaultNow(),
  },
  (t) => [index('webhooks_team_id_idx').on(t.teamId)],
);

/**
 * JSON kept as the exact text written (a `text` column), read back parsed: a delivery record's
 * payload is the body that was signed and sent, copied from its outbox row's text. As `jsonb`,
 * PostgreSQL parsed every body again on every record (7 % of the recording statement's CPU,
 * issue #11 bench, session 23) and stored it reordered.
 */
const jsonText = customType<{ data: unknown; driverData: string }>({
  dataType: () => 'text',
  toDriver: (value) => JSON.stringify(value),
  fromDriver: (value) => JSON.parse(value),
});

/**
 * One row per delivery attempt (issue #11): `messageId` is the Standard Webhooks `webhook-id`,
 * the same for every attempt of one event to one webhook; `error` says why an attempt got no
 * HTTP answer (refused, timeout, …).
 */
export const webhookDeliveries = pgTable(
  'webhook_deliveries',
  {
    id: text('id').primaryKey(),
    // No foreign key to teams: the webhook's trigger (below) already takes a team's records along,
    // and a second key checked on every record cost PostgreSQL a lookup per attempt (issue #11
    // bench). The recorder writes the webhook's own team here.
    teamId: text('team_id').notNull(),
    // No foreign key either (migration 0020): its check was a query per record (9-10 % of the
    // recording statement's CPU, issue #11 bench, session 23). The recording statement locks each
    // of its records' webhooks once (key share) and writes no record of a webhook that is gone, and
    // a webhook's delete trigger (`webhooks_delete_deliveries`) deletes its records, also when a
    // team's deletion cascades to its webhooks.
    webhookId: text('webhook_id').notNull(),
    messageId: text('message_id').notNull(),
    event: text('event').notNull(),
    payload: jsonText('payload').notNull(),
    responseStatus: integer('response_status'),
    responseBody: text('response_body'),
    success: boolean('success').notNull().default(false),
    attemptCount: integer('attempt_count').notNull().default(0),
    durationMs: integer('duration_ms'),
    error: text('error'),
    createdAt: ts('created_at').notNull().defaultNow(),
  },
  (t) => [
    index('webhook_deliveries_webhook_idx').on(t.webhookId, t.createdAt),
    index('webhook_deliveries_message_idx').on(t.messageId),
  ],
);

/**
 * The webhook outbox (issue #11): one row per webhook attempt waiting or in flight, written in the
 * transaction of the status change that causes it (webhook-outbox.ts) and deleted with the
 * attempt's delivery record (webhook-dispatcher.ts). `body` is the event's JSON text as it is sent
 * and stored on the record; `dueAt` is when the attempt may be made (a failed attempt moves it to
 * its retry time); `leasedUntil` is the end of its claimant's lease (a worker that dies leaves the
 * row to be claimed again then); `claims` counts every claim, and fences a claimant's writes to its
 * own claim. A lean table, not pg-boss jobs: a claim writes no indexed column, so PostgreSQL
 * updates the row in place (HOT, room left by fillfactor 50): 3-4 µs a row on this machine, where
 * moving `due_at` cost 12 and pg-boss's claim and completion 24 and 18 (issue #11 bench).
 */
export const webhookOutbox = pgTable(
  'webhook_outbox',
  {
    id: bigint('id', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity(),
    webhookId: text('webhook_id')
      .notNull()
      .references(() => webhooks.id, { onDelete: 'cascade' }),
    /**
     * The webhook's team, copied when the row is written: the claim caps each team's rows, so two
     * webhooks of one team cannot take every delivery slot (review finding, session 15).
     */
    teamId: text('team_id'),
    messageId: text('message_id').notNull(),
    event: text('event').notNull(),
    body: text('body').notNull(),
    attempt: integer('attempt').notNull().default(1),
    claims: integer('claims').notNull().default(0),
    dueAt: ts('due_at').notNull().defaultNow(),
    leasedUntil: ts('leased_until'),
    createdAt: ts('created_at').notNull().defaultNow(),
  },
  (t) => [
    index('webhook_outbox_due_idx').on(t.dueAt),
    // The claim webhook by webhook when some are capped (webhooks.repository.ts perWebhookCandidates).
    index('webhook_outbox_webhook_due_idx').on(t.webhookId, t.dueAt),
  ],
);

/** PostgreSQL `bytea` as a Buffer (drizzle-orm 0.45 has no built-in bytea column). */
const bytea = customType<{ data: Buffer; driverData: Buffer }>({ dataType: () => 'bytea' });

/**
 * The send fields of issue #10 beyond the log's own columns (cc, bcc, replyTo, headers, tags,
 * metadata, the raw subject override, the schedule): one row per email that was sent with any of
 * them, so a plain send writes nothing more. Resend copies the row.
 */
export const emailSendOptions = pgTable('email_send_options', {
  emailId: text('email_id')
    .primaryKey()
    .references(() => emailLogs.id, { onDelete: 'cascade' }),
  teamId: teamId(),
  cc: text('cc').array().notNull().default(sql`'{}'::text[]`),
  bcc: text('bcc').array().notNull().default(sql`'{}'::text[]`),
  replyTo: text('reply_to').array().notNull().default(sql`'{}'::text[]`),
  headers: jsonb('headers').notNull().default({}),
  tags: jsonb('tags').notNull().default({}),
  metadata: jsonb('metadata').notNull().default({}),
  /** The caller's `subject` override as written (Liquid), re-rendered on resend. */
  subjectTemplate: text('subject_template'),
  scheduledAt: ts('scheduled_at'),
  /** The adapter the caller named (`adapterId`); null when the team's default was used. */
  adapterId: text('adapter_id'),
  /** The send's `trackOpens` / `trackClicks` override (issue #11); null: the template's setting. */
  trackOpens: boolean('track_opens'),
  trackClicks: boolean('track_clicks'),
});

/**
 * Files attached to an email at send (issue #10), kept in the database so that every retry and a
 * resend still have them (the worker reads them by email id).
 */
export const emailAttachments = pgTable(
  'email_attachments',
  {
    id: text('id').primaryKey(),
    teamId: teamId(),
    emailId: text('email_id')
      .notNull()
      .references(() => emailLogs.id, { onDelete: 'cascade' }),
    position: integer('position').notNull(),
    filename: text('filename').notNull(),
    contentType: text('content_type').notNull(),
    /** Decoded size in bytes. */
    size: integer('size').notNull(),
    content: bytea('content').notNull(),
  },
  (t) => [index('email_attachments_email_idx').on(t.emailId, t.position)],
);

/**
 * `Idempotency-Key` records of the public send API (issue #10): one per API key and key, kept 24 h.
 * The primary key is what makes concurrent duplicates safe: exactly one request inserts the row.
 * `responseStatus` is null while the first request is still running.
 */
export const idempotencyKeys = pgTable(
  'idempotency_keys',
  {
    apiKeyId: text('api_key_id')
      .notNull()
      .references(() => apiKeys.id, { onDelete: 'cascade' }),
    key: text('key').notNull(),
    teamId: teamId(),
    requestHash: text('request_hash').notNull(),
    responseStatus: integer('response_status'),
    /** The first answer's JSON text as it was sent: a replay sends the same bytes (jsonb reordered keys). */
    responseBody: text('response_body'),
    createdAt: ts('created_at').notNull().defaultNow(),
    expiresAt: ts('expires_at').notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.apiKeyId, t.key] }),
    index('idempotency_keys_expires_idx').on(t.expiresAt),
  ],
);

/** A team's suppressed recipient addresses (issue #10): sends to them fail without the provider. */
export const suppressions = pgTable(
  'suppressions',
  {
    id: text('id').primaryKey(),
    teamId: teamId(),
    /** The bare address, lower-cased. */
    address: text('address').notNull(),
    reason: text('reason').notNull(),
    createdAt: ts('created_at').notNull().defaultNow(),
  },
  (t) => [uniqueIndex('suppressions_team_address_idx').on(t.teamId, t.address)],
);

/**
 * Signature tokens a provider's events were accepted with, per adapter (issue #11: Mailgun signs
 * timestamp + token, not the event, so a token is accepted once); all processes share them. A claim
 * counts only rows seen within its window; the workers' maintenance loop deletes older ones
 * (modules/maintenance, by `seen_at`).
 */
export const providerEventTokens = pgTable(
  'provider_event_tokens',
  {
    adapterId: text('adapter_id')
      .notNull()
      .references(() => adapters.id, { onDelete: 'cascade' }),
    token: text('token').notNull(),
    seenAt: ts('seen_at').notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.adapterId, t.token] }),
    index('provider_event_tokens_seen_at_idx').on(t.seenAt),
  ],
);

/**
 * The builder's uploaded images (`POST /api/uploads/images`), one row per stored file: what counts
 * against the team's upload quota (UPLOAD_TEAM_QUOTA_BYTES, UPLOAD_TEAM_MAX_FILES) and what
 * `GET /api/uploads/images` lists (storage itself cannot list). The row is written before the file
 * and deleted after it, so a file is never stored without its row; a row whose file is missing (a
 * crash between the two) still lists and can be deleted. Images uploaded before this table existed
 * have no row.
 */
export const uploads = pgTable(
  'uploads',
  {
    /** The storage key, `<teamId>/img_<typeid>.<ext>`. */
    key: text('key').primaryKey(),
    teamId: teamId(),
    contentType: text('content_type').notNull(),
    /** Bytes stored. */
    size: integer('size').notNull(),
    createdAt: ts('created_at').notNull().defaultNow(),
  },
  (t) => [index('uploads_team_created_idx').on(t.teamId, t.createdAt)],
);
