/**
 * The slots of a worker kept for teams holding none (the email claim loop, jobs/claim-loop.ts; the
 * webhook dispatcher's requests and claimed rows, modules/webhooks/webhook-dispatcher.ts).
 *
 * Why: a per-team cap (`email.send`'s group cap of 4 × ADAPTER_MAX_CONNECTIONS, the webhook
 * dispatcher's half of WORKER_CONCURRENCY) bounds one team, not several. Teams whose providers or
 * receivers hang until the deadline hold their slots for the whole deadline, and a slot they freed
 * went back to them (their backlog came first): with the defaults, three such teams held every
 * email slot of a worker (3 × 80 > 200) and two every webhook slot (2 × 100), for as long as they
 * had a backlog, while every other team waited (review finding, session 15). The last tenth of the
 * slots goes only to teams holding none there, so a team that starts sending finds a slot at once,
 * and teams already holding slots share the other nine tenths as before. (A max-min fair share
 * per team was tried first, session 17: its counting stalled a webhook's row and shrank busy
 * teams' shares for good; the reserve needs no counting beyond which teams hold slots.)
 * @returns slots (≥ 1).
 */
export function reservedSlots(slots: number): number {
  return Math.max(1, Math.ceil(slots / 10));
}
