import { describe, expect, it } from 'vitest';
import { KeyedSlots } from './keyed-slots.ts';
import { SendSlots } from './providers/send-slots.ts';
import { ProviderError } from './providers/types.ts';

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('SendSlots', () => {
  it('grants at most `limit` slots per key, then in arrival order as slots come back', async () => {
    const slots = new SendSlots();
    const first = await slots.acquire('adp_a', 2);
    await slots.acquire('adp_a', 2);
    await slots.acquire('adp_b', 2); // another adapter is not affected
    const order: string[] = [];
    const granted = (name: string) => (release: () => void) => {
      order.push(name);
      return release;
    };
    const third = slots.acquire('adp_a', 2).then(granted('third'));
    const fourth = slots.acquire('adp_a', 2).then(granted('fourth'));
    await tick();
    expect(order).toEqual([]);
    expect(slots.busy('adp_a')).toBe(2);
    first();
    first(); // giving a slot back twice frees it once
    await tick();
    expect(order).toEqual(['third']);
    (await third)();
    await fourth;
    expect(order).toEqual(['third', 'fourth']);
    expect(slots.busy('adp_a')).toBe(2);
  });

  it('gives up a wait when its signal aborts, as a transient error, without taking a slot', async () => {
    const slots = new SendSlots();
    const held = await slots.acquire('adp_a', 1);
    const abort = new AbortController();
    const waiting = slots.acquire('adp_a', 1, abort.signal);
    const after = slots.acquire('adp_a', 1);
    abort.abort(new Error('the worker is stopping'));
    const error = await waiting.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProviderError);
    expect(error).toMatchObject({ permanent: false, providerCode: 'EABORT' });
    expect((error as Error).message).toContain('before anything was sent');
    held();
    (await after)();
    expect(slots.busy('adp_a')).toBe(0);
    await expect(slots.acquire('adp_a', 1, abort.signal)).rejects.toThrow('the worker is stopping');
  });

  it('a KeyedSlots of its own (log reads, tracking) rejects a given-up wait with the signal’s reason', async () => {
    const slots = new KeyedSlots();
    const held = await slots.acquire('team', 1);
    const abort = new AbortController();
    const waiting = slots.acquire('team', 1, abort.signal);
    expect(slots.waiting('team')).toBe(1);
    const reason = new Error('request closed');
    abort.abort(reason);
    await expect(waiting).rejects.toBe(reason);
    expect(slots.waiting('team')).toBe(0);
    held();
    expect(slots.busy('team')).toBe(0);
  });

  it('gives up a wait on whichever of several signals aborts first, with that signal’s reason', async () => {
    const slots = new KeyedSlots();
    const held = await slots.acquire('adp', 1);
    const claim = new AbortController();
    const stopping = new AbortController();
    const waiting = slots.acquire('adp', 1, [claim.signal, stopping.signal]);
    const reason = new Error('the worker is stopping');
    stopping.abort(reason);
    claim.abort(new Error('claim lost')); // after the first: changes nothing
    await expect(waiting).rejects.toBe(reason);
    expect(slots.waiting('adp')).toBe(0);
    // Already aborted: refused at once, even with a slot free, and nothing is held.
    held();
    await expect(slots.acquire('adp', 1, [new AbortController().signal, stopping.signal])).rejects.toBe(
      reason,
    );
    expect(slots.busy('adp')).toBe(0);
    // A granted wait stops listening: a later abort does not take its slot back.
    const first = await slots.acquire('adp', 1);
    const later = new AbortController();
    const granted = slots.acquire('adp', 1, [later.signal]);
    first();
    const release = await granted;
    later.abort(new Error('too late'));
    expect(slots.busy('adp')).toBe(1);
    release();
    expect(slots.busy('adp')).toBe(0);
  });
});
