import { describe, expect, it } from 'vitest';
import { RenderFailedError } from './pdf.client.ts';
import { RenderQueue } from './render-queue.ts';

/** A render that ends when the test says so. */
function pending() {
  let finish!: () => void;
  const done = new Promise<void>((resolve) => {
    finish = resolve;
  });
  return { done, finish };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('RenderQueue: the renderer shared between teams in turn', () => {
  it('hands freed slots to the teams with renders waiting in turn, each team in its own order', async () => {
    const queue = new RenderQueue({ slots: 1, maxWaitingPerTeam: 10, maxWaitMs: 10_000 });
    const started: string[] = [];
    const renders = new Map<string, ReturnType<typeof pending>>();
    const submit = (teamId: string, label: string) => {
      const render = pending();
      renders.set(label, render);
      return queue.run(teamId, async () => {
        started.push(label);
        await render.done;
        return label;
      });
    };
    const all = [
      submit('a', 'a1'),
      submit('a', 'a2'),
      submit('a', 'a3'),
      submit('b', 'b1'),
      submit('c', 'c1'),
    ];
    all.push(submit('b', 'b2'));
    for (const label of ['a1', 'a2', 'b1', 'c1', 'a3', 'b2']) {
      await tick();
      expect(started.at(-1)).toBe(label);
      renders.get(label)!.finish();
    }
    expect(await Promise.all(all)).toEqual(['a1', 'a2', 'a3', 'b1', 'c1', 'b2']);
    expect(started).toEqual(['a1', 'a2', 'b1', 'c1', 'a3', 'b2']);
    expect(queue.active).toBe(0);
  });

  it("refuses a team's render beyond its waiting cap at once (RENDERER_BUSY), other teams' still wait", async () => {
    const queue = new RenderQueue({ slots: 1, maxWaitingPerTeam: 2, maxWaitMs: 10_000 });
    const busy = pending();
    const first = queue.run('a', () => busy.done);
    const waiting = [queue.run('a', async () => 'a2'), queue.run('a', async () => 'a3')];
    const refused = await queue.run('a', async () => 'a4').catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(RenderFailedError);
    expect(refused).toMatchObject({ failure: 'RENDERER_BUSY' });
    const other = queue.run('b', async () => 'b1');
    busy.finish();
    await first;
    expect(await Promise.all([...waiting, other])).toEqual(['a2', 'a3', 'b1']);
  });

  it('fails a render that waited longer than maxWaitMs (RENDERER_TIMEOUT) without making it', async () => {
    const queue = new RenderQueue({ slots: 1, maxWaitingPerTeam: 10, maxWaitMs: 50 });
    const busy = pending();
    const first = queue.run('a', () => busy.done);
    let made = false;
    const late = await queue
      .run('b', async () => {
        made = true;
      })
      .catch((error: unknown) => error);
    expect(late).toMatchObject({ failure: 'RENDERER_TIMEOUT' });
    busy.finish();
    await first;
    expect(made).toBe(false);
    expect(queue.active).toBe(0);
    // The slot is free again: the next render starts at once.
    expect(await queue.run('b', async () => 'next')).toBe('next');
  });

  it('frees the slot of a render that throws', async () => {
    const queue = new RenderQueue({ slots: 1, maxWaitingPerTeam: 10, maxWaitMs: 10_000 });
    await expect(queue.run('a', async () => Promise.reject(new Error('Chromium failed')))).rejects.toThrow(
      'Chromium failed',
    );
    expect(await queue.run('a', async () => 'after')).toBe('after');
  });

  it('drops the renders waiting for a slot at once when their signal aborts, and refuses new ones', async () => {
    const queue = new RenderQueue({ slots: 1, maxWaitingPerTeam: 10, maxWaitMs: 60_000 });
    const cut = new AbortController();
    const first = pending();
    const running = queue.run('a', () => first.done.then(() => 'first'), cut.signal);
    let made = false;
    const waiting = queue.run(
      'b',
      async () => {
        made = true;
        return 'second';
      },
      cut.signal,
    );
    await tick();
    const startedAt = Date.now();
    cut.abort(new Error('the server is stopping'));
    const failure = await waiting.catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(RenderFailedError);
    expect((failure as RenderFailedError).failure).toBe('RENDERER_UNREACHABLE');
    expect((failure as RenderFailedError).message).toBe('the server is stopping');
    expect(Date.now() - startedAt).toBeLessThan(1_000);
    await expect(queue.run('c', async () => 'third', cut.signal)).rejects.toMatchObject({
      failure: 'RENDERER_UNREACHABLE',
    });
    // The render already made is the renderer client's to abandon; its slot is freed as usual.
    first.finish();
    expect(await running).toBe('first');
    expect(made).toBe(false);
    expect(queue.active).toBe(0);
  });
});
