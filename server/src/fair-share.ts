/**
 * Max-min fair shares of a worker's slots among teams (the email claim loop, jobs/claim-loop.ts;
 * the webhook dispatcher, modules/webhooks/webhook-dispatcher.ts).
 */

/** What one group (a team) holds of a worker's slots, as {@link groupShare} weighs it. */
export interface GroupLoad {
  /** Slots it holds now (0 for a group remembered after its last job ended). */
  held: number;
  /** Whether it wants more than it holds (the share held it back, or it has work waiting). */
  heldBack: boolean;
}

/**
 * The most slots one group may hold of `maxInFlight` (a claim loop's jobs, the webhook
 * dispatcher's requests): max-min fairness ("water-filling") among `groups`, with a tenth of the
 * slots ({@link reservedSlots}) kept for groups not holding any yet. A group that is not held back
 * keeps what it holds, as long as that is under an even split; the slots left are split evenly
 * among the others. So a team with nothing here yet finds free slots, teams sending a few emails
 * each do not shrink a busy team's share to theirs, and a team alone gets nine tenths of the slots
 * (its own cap is usually lower).
 *
 * Why: a per-team cap (`email.send`'s group cap of 4 × ADAPTER_MAX_CONNECTIONS, the webhook
 * dispatcher's half of WORKER_CONCURRENCY) bounds one team, not several. Teams whose providers or
 * receivers hang until the deadline hold their slots for the whole deadline, and a slot they freed
 * went back to them (their backlog came first): with the defaults, three such teams held every
 * email slot of a worker (3 × 80 > 200) and two every webhook slot (2 × 100), for as long as they
 * had a backlog, while every other team waited (review finding, session 15). With the share, the
 * reserve stays free for others; a share that shrinks when another group arrives takes effect as
 * the slots above it are freed (within one deadline): held slots are never taken back.
 * @returns slots (≥ 1).
 */
export function groupShare(maxInFlight: number, groups: readonly GroupLoad[]): number {
  const keeping = groups
    .filter((group) => !group.heldBack)
    .map((group) => group.held)
    .sort((a, b) => a - b);
  let slots = maxInFlight - reservedSlots(maxInFlight);
  let sharing = groups.length;
  let largestKept = 0;
  for (const held of keeping) {
    if (held * sharing > slots) break;
    slots -= held;
    sharing -= 1;
    largestKept = held;
  }
  // Every group content with what it holds: any may grow into the slots left.
  if (sharing === 0) return Math.max(1, largestKept + slots);
  return Math.max(1, Math.floor(slots / sharing));
}

/** The slots of `maxInFlight` kept for groups not holding any yet: a tenth (≥ 1). */
export function reservedSlots(maxInFlight: number): number {
  return Math.max(1, Math.ceil(maxInFlight / 10));
}
