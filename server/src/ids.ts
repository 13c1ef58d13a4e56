import { TypeID, typeid } from 'typeid-js';

/**
 * Id prefixes from the spec ("Resources and their fields"), plus the internal ones
 * (sessions, accounts, members, invitations, verifications, status events).
 */
export const ID_PREFIX = {
  apiKey: 'key',
  adapter: 'adp',
  template: 'tpl',
  templateVersion: 'ver',
  emailLog: 'eml',
  emailEvent: 'evt',
  webhook: 'whk',
  webhookDelivery: 'del',
  job: 'job',
  user: 'usr',
  team: 'team',
  session: 'ses',
  account: 'acc',
  member: 'mem',
  invitation: 'inv',
  verification: 'vrf',
} as const;

export type IdKind = keyof typeof ID_PREFIX;

/** A new time-sortable TypeID string such as `tpl_01jd…` (UUIDv7 inside). */
export function newId(kind: IdKind): string {
  return typeid(ID_PREFIX[kind]).toString();
}

/**
 * A job id: the TypeID (`job_…`) shown to clients and the UUID pg-boss stores,
 * two spellings of the same UUIDv7.
 */
export function newJobId(): { jobId: string; uuid: string } {
  const id = typeid(ID_PREFIX.job);
  return { jobId: id.toString(), uuid: id.toUUID() };
}

/** The `job_…` spelling of a pg-boss job UUID. */
export function jobIdFromUuid(uuid: string): string {
  return TypeID.fromUUID(ID_PREFIX.job, uuid).toString();
}

/** True when `value` looks like an id of `kind` (prefix check only, no database look-up). */
export function hasIdPrefix(value: string, kind: IdKind): boolean {
  return value.startsWith(`${ID_PREFIX[kind]}_`);
}
