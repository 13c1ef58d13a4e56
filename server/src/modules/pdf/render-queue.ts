import { abandonedFailure, RenderFailedError } from './pdf.client.ts';

/** How a {@link RenderQueue} shares the renderer. */
export interface RenderQueueOptions {
  /** Renders handed to the renderer at once by this process (PDF_RENDERER_PAGES). */
  slots: number;
  /** Renders of one team waiting at once; one more is refused at once (RENDERER_BUSY). */
  maxWaitingPerTeam: number;
  /** Longest wait for a slot (ms); past it the render fails with RENDERER_TIMEOUT without being made. */
  maxWaitMs: number;
}

interface Waiter {
  start: () => void;
  timer: NodeJS.Timeout;
}

/**
 * Shares the renderer's pages between teams: at most `slots` renders in flight from this process,
 * and when they are all taken, a freed slot goes to the teams with renders waiting in turn (round
 * robin: each team's renders in their order, one team's turn per slot), not to the oldest request
 * overall. With one first-come queue, a team that started a hundred PDF sends made every other
 * team's PDF wait behind all of them, and their deadline (which counted the wait) passed: their
 * sends failed with PDF_GENERATION_FAILED while the flooding team's went through. Now another
 * team's render waits for about one render per team with renders waiting, and a team's backlog
 * delays only that team.
 * A wait longer than `maxWaitMs` fails with RENDERER_TIMEOUT, and a team's render beyond
 * `maxWaitingPerTeam` waiting fails at once with RENDERER_BUSY (the send answers
 * PDF_GENERATION_FAILED, spec case rule 5, with that cause). The fairness is per process: API
 * processes sharing one PDF_RENDERER_URL each share their own slots.
 */
export class RenderQueue {
  readonly #options: RenderQueueOptions;
  #active = 0;
  /** Waiting renders per team; the map's order is the teams' turn order (the next turn first). */
  readonly #waiting = new Map<string, Waiter[]>();

  constructor(options: RenderQueueOptions) {
    this.#options = options;
  }

  /** Renders in flight now (for tests and diagnostics). */
  get active(): number {
    return this.#active;
  }

  /**
   * Runs `render` for `teamId` once a slot is free and it is the team's turn. A render waiting for
   * its turn when `signal` aborts (a stopping server cut its request, runtime.ts closeWithin) leaves
   * the queue at once and is never made; one not yet queued when it is aborted is refused.
   * @returns what `render` returns.
   * @throws RenderFailedError RENDERER_BUSY (the team already has `maxWaitingPerTeam` renders
   *   waiting), RENDERER_TIMEOUT (no slot within `maxWaitMs`) or RENDERER_UNREACHABLE (`signal`
   *   aborted, its reason as the message); whatever `render` throws.
   */
  async run<T>(teamId: string, render: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    if (signal?.aborted) throw abandonedFailure(signal);
    await this.#acquire(teamId, signal);
    try {
      return await render();
    } finally {
      this.#release();
    }
  }

  #acquire(teamId: string, signal: AbortSignal | undefined): Promise<void> {
    if (this.#active < this.#options.slots && this.#waiting.size === 0) {
      this.#active++;
      return Promise.resolve();
    }
    let queue = this.#waiting.get(teamId);
    if ((queue?.length ?? 0) >= this.#options.maxWaitingPerTeam) {
      return Promise.reject(
        new RenderFailedError(
          'RENDERER_BUSY',
          `this team already has ${this.#options.maxWaitingPerTeam} PDF renders waiting for the renderer`,
        ),
      );
    }
    if (!queue) {
      queue = [];
      this.#waiting.set(teamId, queue);
    }
    const team = queue;
    return new Promise<void>((resolve, reject) => {
      const leave = (error: RenderFailedError) => {
        clearTimeout(waiter.timer);
        signal?.removeEventListener('abort', onAbort);
        const index = team.indexOf(waiter);
        if (index >= 0) team.splice(index, 1);
        if (team.length === 0 && this.#waiting.get(teamId) === team) this.#waiting.delete(teamId);
        reject(error);
      };
      const onAbort = () => leave(abandonedFailure(signal!));
      const waiter: Waiter = {
        // The slot is handed over by #release (the count stays as it is).
        start: () => {
          clearTimeout(waiter.timer);
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
        timer: setTimeout(
          () =>
            leave(
              new RenderFailedError(
                'RENDERER_TIMEOUT',
                `no renderer page was free within ${this.#options.maxWaitMs} ms`,
              ),
            ),
          this.#options.maxWaitMs,
        ),
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      team.push(waiter);
    });
  }

  /** A render ended: its slot goes to the first waiting render of the team whose turn it is. */
  #release(): void {
    const next = this.#waiting.entries().next();
    if (next.done) {
      this.#active--;
      return;
    }
    const [teamId, queue] = next.value;
    const waiter = queue.shift()!;
    // The team's turn is over: it goes to the back of the order (or leaves it, with nothing waiting).
    this.#waiting.delete(teamId);
    if (queue.length > 0) this.#waiting.set(teamId, queue);
    waiter.start();
  }
}
