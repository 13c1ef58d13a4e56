import { describe, expect, it } from 'vitest';
import { createUnknownKeyThrottle, throttleClientOf } from './unknown-key-throttle.ts';

describe('unknown API key throttle', () => {
  it('allows `limit` unknown keys per client and minute, then says how long to wait', () => {
    const throttle = createUnknownKeyThrottle(3);
    const start = 1_000_000;
    for (let i = 0; i < 3; i++) {
      expect(throttle.waitSeconds('a', start + i)).toBe(0);
      throttle.recordUnknown('a', start + i);
    }
    expect(throttle.waitSeconds('a', start + 10)).toBe(60);
    expect(throttle.waitSeconds('a', start + 59_500)).toBe(1);
    expect(throttle.waitSeconds('b', start + 10)).toBe(0);
    // The window ends a minute after its first unknown key; a new one starts from zero.
    expect(throttle.waitSeconds('a', start + 60_000)).toBe(0);
    throttle.recordUnknown('a', start + 60_000);
    expect(throttle.waitSeconds('a', start + 60_001)).toBe(0);
  });

  it('counts IPv4 addresses alone, IPv6 by /64, mapped IPv4 as IPv4', () => {
    expect(throttleClientOf('203.0.113.7')).toBe('203.0.113.7');
    expect(throttleClientOf('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(throttleClientOf('2001:db8:1:2:aaaa::1')).toBe(throttleClientOf('2001:db8:1:2:bbbb::9'));
    expect(throttleClientOf('2001:db8:1:2::1')).not.toBe(throttleClientOf('2001:db8:1:3::1'));
    expect(throttleClientOf('not an address')).toBe('not an address');
  });
});
