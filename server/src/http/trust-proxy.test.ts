import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../config.ts';

const trustProxyOf = (value: string) => loadConfig({ TRUST_PROXY: value }).TRUST_PROXY;

describe('TRUST_PROXY', () => {
  it('defaults to trusting no proxy', () => {
    expect(loadConfig({}).TRUST_PROXY).toBe(false);
    expect(trustProxyOf('false')).toBe(false);
    expect(trustProxyOf('0')).toBe(false);
  });

  it('takes a hop count or a list of proxy addresses and CIDRs', () => {
    expect(trustProxyOf('1')).toBe(1);
    expect(trustProxyOf('2')).toBe(2);
    expect(trustProxyOf('10.0.0.0/8, 127.0.0.1,::1,fd00::/8,loopback')).toEqual([
      '10.0.0.0/8',
      '127.0.0.1',
      '::1',
      'fd00::/8',
      'loopback',
    ]);
  });

  it.each(['true', 'yes', '10.0.0.0/33', '10.0.0/8', 'proxy.internal', '1,2', '21', ','])(
    'refuses %s with a one-line message saying what to write',
    (value) => {
      let error: unknown;
      try {
        loadConfig({ TRUST_PROXY: value });
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as Error).message).toMatch(/^Invalid TRUST_PROXY: /);
      expect((error as Error).message).not.toContain('\n');
    },
  );

  it('explains why "true" is refused', () => {
    expect(() => trustProxyOf('true')).toThrow(/number of proxies .*addresses\/CIDRs/);
  });
});
