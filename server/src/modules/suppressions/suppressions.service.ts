import { and, asc, count, eq, sql } from 'drizzle-orm';
import { z } from 'zod';
import type { Executor } from '../../db/client.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import { suppressions } from '../../db/schema/index.ts';
import { type Page, page, paginationQuery } from '../../http/envelope.ts';
import { AppError, notFound } from '../../http/errors.ts';
import { newId } from '../../ids.ts';
import { mailboxAddress, mailboxSchema } from '../../providers/mailbox-address.ts';

/**
 * A team's suppression list (issue #10): addresses no email of the team is sent to. The worker
 * checks every recipient before calling the provider ({@link findSuppression}, once per batch and
 * again for an email that waited long for its connection slot); an email to a
 * suppressed address ends `failed` with errorMessage "suppressed: <reason>". Addresses are stored
 * bare and lower-cased, so `Ada <ADA@Example.com>` and `ada@example.com` are the same entry.
 */

export type SuppressionRow = typeof suppressions.$inferSelect;

/** `POST /api/suppressions` body. */
export const createSuppressionBody = z.object({
  address: mailboxSchema,
  reason: z.string().trim().min(1).max(500).default('manual'),
});

/** `GET /api/suppressions` query: pagination and an optional exact address. */
export const suppressionListQuery = paginationQuery.extend({ address: z.string().max(320).optional() });

export const suppressionView = z.object({
  id: z.string(),
  address: z.string(),
  reason: z.string(),
  createdAt: z.string(),
});
export type SuppressionView = z.infer<typeof suppressionView>;

/** The key an address is stored and looked up under: the bare address, lower-cased. */
export function suppressionKey(mailbox: string): string {
  return mailboxAddress(mailbox).toLowerCase();
}

function present(row: SuppressionRow): SuppressionView {
  return { id: row.id, address: row.address, reason: row.reason, createdAt: row.createdAt.toISOString() };
}

/** The team's suppressions, oldest first, paginated; `address` filters to that one address. */
export async function listSuppressions(
  db: Executor,
  teamId: string,
  query: z.infer<typeof suppressionListQuery>,
): Promise<Page<SuppressionView>> {
  const where = and(
    eq(suppressions.teamId, teamId),
    query.address ? eq(suppressions.address, suppressionKey(query.address)) : undefined,
  );
  const [rows, totals] = await Promise.all([
    db
      .select()
      .from(suppressions)
      .where(where)
      .orderBy(asc(suppressions.createdAt), asc(suppressions.id))
      .limit(query.pageSize)
      .offset((query.page - 1) * query.pageSize),
    db.select({ total: count() }).from(suppressions).where(where),
  ]);
  return page(rows.map(present), totals[0]?.total ?? 0, query.page, query.pageSize);
}

/**
 * Adds `address` to the team's list.
 * @throws ALREADY_EXISTS (409) when it is on the list already.
 */
export async function addSuppression(
  db: Executor,
  teamId: string,
  input: { address: string; reason: string },
): Promise<SuppressionView> {
  try {
    const [row] = await db
      .insert(suppressions)
      .values({
        id: newId('suppression'),
        teamId,
        address: suppressionKey(input.address),
        reason: input.reason,
      })
      .returning();
    return present(row!);
  } catch (error) {
    if (isUniqueViolation(error)) {
      throw new AppError('ALREADY_EXISTS', `${suppressionKey(input.address)} is already suppressed`);
    }
    throw error;
  }
}

/**
 * Adds each of `entries` (address, reason) to its team's list in ONE statement; addresses already
 * on the list keep their entry (and reason). Used by the automatic rules (issue #11: a hard bounce
 * or a complaint suppresses that one address). No-op for an empty list. The entries travel as ONE
 * JSON parameter (`jsonb_to_recordset`): a provider's batch may hold more addresses than
 * PostgreSQL's 65,535 bound parameters would allow at one parameter per value.
 */
export async function addSuppressions(
  db: Executor,
  entries: readonly { teamId: string; address: string; reason: string }[],
): Promise<void> {
  const unique = new Map<string, { teamId: string; address: string; reason: string }>();
  for (const entry of entries) {
    const address = suppressionKey(entry.address);
    const key = `${entry.teamId} ${address}`;
    if (!unique.has(key)) unique.set(key, { teamId: entry.teamId, address, reason: entry.reason });
  }
  if (unique.size === 0) return;
  const source = [...unique.values()].map((entry) => ({
    id: newId('suppression'),
    team_id: entry.teamId,
    address: entry.address,
    reason: entry.reason,
  }));
  await db.execute(sql`
    insert into ${suppressions} (id, team_id, address, reason)
    select v.id, v.team_id, v.address, v.reason
    from jsonb_to_recordset(${JSON.stringify(source)}::jsonb) as v(id text, team_id text, address text, reason text)
    on conflict (team_id, address) do nothing`);
}

/** Removes suppression `id` of the team. @throws NOT_FOUND. */
export async function removeSuppression(db: Executor, teamId: string, id: string): Promise<void> {
  const removed = await db
    .delete(suppressions)
    .where(and(eq(suppressions.teamId, teamId), eq(suppressions.id, id)))
    .returning({ id: suppressions.id });
  if (removed.length === 0) throw notFound('Suppression');
}

/** A suppressed address and why. */
export interface Suppressed {
  address: string;
  reason: string;
}

interface PendingLookup {
  teamId: string;
  keys: string[];
  resolve: (found: Suppressed | undefined) => void;
  reject: (error: unknown) => void;
}

/** Lookups waiting for the next coalesced query, per database handle. */
const pendingLookups = new WeakMap<Executor, PendingLookup[]>();

/**
 * The first of `mailboxes` on the team's suppression list, with its reason, or undefined. The worker
 * calls it for every email of a batch when it loads the batch (and again before sending an email
 * that waited long for its connection slot); the lookups made in the same turn of the event loop
 * share ONE indexed query on (team_id, address).
 * @throws database errors (the worker retries the email).
 */
export function findSuppression(
  db: Executor,
  teamId: string,
  mailboxes: readonly string[],
): Promise<Suppressed | undefined> {
  if (mailboxes.length === 0) return Promise.resolve(undefined);
  return new Promise((resolve, reject) => {
    let pending = pendingLookups.get(db);
    if (!pending) {
      pending = [];
      pendingLookups.set(db, pending);
      setImmediate(() => {
        pendingLookups.delete(db);
        void runLookups(db, pending!);
      });
    }
    pending.push({ teamId, keys: mailboxes.map(suppressionKey), resolve, reject });
  });
}

async function runLookups(db: Executor, lookups: PendingLookup[]): Promise<void> {
  const pairs = lookups.flatMap((lookup) =>
    lookup.keys.map((address) => ({ team_id: lookup.teamId, address })),
  );
  let rows: { team_id: string; address: string; reason: string }[];
  try {
    const result = (await db.execute(sql`
      select s.team_id, s.address, s.reason
      from jsonb_to_recordset(${JSON.stringify(pairs)}::jsonb) as v(team_id text, address text)
      join ${suppressions} s on s.team_id = v.team_id and s.address = v.address`)) as unknown as {
      rows: { team_id: string; address: string; reason: string }[];
    };
    rows = result.rows;
  } catch (error) {
    for (const lookup of lookups) lookup.reject(error);
    return;
  }
  const found = new Map(rows.map((row) => [`${row.team_id}/${row.address}`, row]));
  for (const lookup of lookups) {
    const hit = lookup.keys
      .map((key) => found.get(`${lookup.teamId}/${key}`))
      .find((row) => row !== undefined);
    lookup.resolve(hit ? { address: hit.address, reason: hit.reason } : undefined);
  }
}
