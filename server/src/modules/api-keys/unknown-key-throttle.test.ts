import { describe, expect, it } from 'vitest';
import { createUnknownKeyThrottle, throttleClientOf } from './unknown-key-throttle.ts';

describe('unknown API key throttle', () => {
  it('allows `limit` unknown keys per client and minute, then says how long to wait', () => {
    const throttle = createUnknownKeyThrottle(3);
    const start = 1_000_000;
    for (let i = 0; i < 3; i++) expect(throttle.reserve('a', start + i)).toBe(0);
    expect(throttle.reserve('a', start + 10)).toBe(60);
    expect(throttle.reserve('a', start + 59_500)).toBe(1);
    expect(throttle.reserve('b', start + 10)).toBe(0);
    // The window ends a minute after its first unknown key; a new one starts from zero.
    expect(throttle.reserve('a', start + 60_000)).toBe(0);
    expect(throttle.reserve('a', start + 60_001)).toBe(0);
  });

  it('counts lookups when they start, and gives back those whose key was found', () => {
    // Review finding, session 18: counted after the read, concurrent lookups all passed.
    const throttle = createUnknownKeyThrottle(2);
    const start = 1_000_000;
    expect(throttle.reserve('a', start)).toBe(0);
    expect(throttle.reserve('a', start)).toBe(0);
    expect(throttle.reserve('a', start)).toBe(60); // two under way: the third waits
    throttle.release('a', start + 1); // the first one's key existed
    expect(throttle.reserve('a', start + 2)).toBe(0);
    expect(throttle.reserve('a', start + 3)).toBeGreaterThan(0);
  });

  it('counts IPv4 addresses alone, IPv6 by /64, mapped IPv4 as IPv4', () => {
    expect(throttleClientOf('203.0.113.7')).toBe('203.0.113.7');
    expect(throttleClientOf('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(throttleClientOf('2001:db8:1:2:aaaa::1')).toBe(throttleClientOf('2001:db8:1:2:bbbb::9'));
    expect(throttleClientOf('2001:db8:1:2::1')).not.toBe(throttleClientOf('2001:db8:1:3::1'));
    expect(throttleClientOf('not an address')).toBe('not an address');
  });
});
