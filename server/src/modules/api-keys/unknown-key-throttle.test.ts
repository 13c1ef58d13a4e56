import { describe, expect, it, vi } from 'vitest';
import { createUnknownKeyThrottle, type LookupDone, throttleClientOf } from './unknown-key-throttle.ts';

describe('unknown API key throttle', () => {
  it('allows `limit` unknown keys per client and minute, then says how long to wait', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const start = 1_000_000;
    vi.setSystemTime(start);
    const throttle = createUnknownKeyThrottle(3);
    for (let i = 0; i < 3; i++) {
      const done = await throttle.begin('a');
      expect(typeof done).toBe('function');
      (done as LookupDone)(true);
    }
    vi.setSystemTime(start + 10);
    expect(await throttle.begin('a')).toBe(60);
    vi.setSystemTime(start + 59_500);
    expect(await throttle.begin('a')).toBe(1);
    expect(typeof (await throttle.begin('b'))).toBe('function');
    // The window ends a minute after it started; a new one starts from zero.
    vi.setSystemTime(start + 60_000);
    expect(typeof (await throttle.begin('a'))).toBe('function');
    vi.useRealTimers();
  });

  it('lets at most `limit` lookups run at once, judges waiting ones again, and counts only unknown keys', async () => {
    // Review findings, session 18: counted after each read, concurrent lookups all passed; counted
    // at the start, real keys were refused for other real keys' lookups.
    const throttle = createUnknownKeyThrottle(2);
    const first = (await throttle.begin('a')) as LookupDone;
    const second = (await throttle.begin('a')) as LookupDone;
    let third: LookupDone | number | undefined;
    void throttle.begin('a').then((result) => {
      third = result;
    });
    await new Promise((resolve) => setImmediate(resolve));
    expect(third).toBeUndefined(); // two under way: the third waits
    first(false); // a real key: counts nothing, the third may start
    await new Promise((resolve) => setImmediate(resolve));
    expect(typeof third).toBe('function');
    second(true);
    (third as LookupDone)(true); // two unknown keys: the budget is spent
    expect(await throttle.begin('a')).toBeGreaterThan(0);
    expect(typeof (await throttle.begin('b'))).toBe('function');
  });

  it('counts IPv4 addresses alone, IPv6 by /64, mapped IPv4 as IPv4', () => {
    expect(throttleClientOf('203.0.113.7')).toBe('203.0.113.7');
    expect(throttleClientOf('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(throttleClientOf('2001:db8:1:2:aaaa::1')).toBe(throttleClientOf('2001:db8:1:2:bbbb::9'));
    expect(throttleClientOf('2001:db8:1:2::1')).not.toBe(throttleClientOf('2001:db8:1:3::1'));
    expect(throttleClientOf('not an address')).toBe('not an address');
  });
});
