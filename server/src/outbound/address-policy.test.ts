import { describe, expect, it } from 'vitest';
import { classifyAddress, refusalOf } from './address-policy.ts';

const PRIVATE = [
  // IPv4 special-purpose blocks (RFC 6890)
  ['127.0.0.1', 'loopback'],
  ['127.255.255.254', 'loopback'],
  ['10.1.2.3', 'private-network'],
  ['172.16.0.1', 'private-network'],
  ['172.31.255.255', 'private-network'],
  ['192.168.1.1', 'private-network'],
  ['169.254.1.1', 'link-local'],
  ['100.64.0.1', 'carrier-grade NAT'],
  ['100.127.255.255', 'carrier-grade NAT'],
  ['0.0.0.0', 'unspecified'],
  ['0.1.2.3', 'unspecified'],
  ['224.0.0.1', 'special-purpose'],
  ['255.255.255.255', 'special-purpose'],
  ['192.0.2.1', 'special-purpose'],
  ['198.18.0.1', 'special-purpose'],
  ['240.0.0.1', 'special-purpose'],
  // IPv6, and IPv4 in IPv6 clothing
  ['::1', 'loopback'],
  ['::', 'unspecified'],
  ['fc00::1', 'private-network (unique local)'],
  ['fd12:3456::1', 'private-network (unique local)'],
  ['fe80::1', 'link-local'],
  ['fe80::1%eth0', 'link-local'],
  ['fec0::1', 'special-purpose'],
  ['ff02::1', 'special-purpose'],
  ['2001:db8::1', 'special-purpose'],
  ['::ffff:127.0.0.1', 'loopback'],
  ['::ffff:7f00:1', 'loopback'],
  ['::ffff:10.0.0.1', 'private-network'],
  ['::ffff:0:7f00:1', 'special-purpose'],
  ['::127.0.0.1', 'loopback'],
  ['::7f00:1', 'special-purpose'],
  ['64:ff9b::7f00:1', 'special-purpose'],
  ['2002:7f00:1::1', 'special-purpose'],
  ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'special-purpose'],
  ['4000::1', 'special-purpose'],
] as const;

const PUBLIC = ['8.8.8.8', '1.1.1.1', '172.32.0.1', '100.128.0.1', '2606:4700:4700::1111', '::ffff:8.8.8.8'];

const METADATA = [
  '169.254.169.254',
  '::ffff:169.254.169.254',
  '::ffff:a9fe:a9fe',
  '64:ff9b::a9fe:a9fe',
  '::169.254.169.254',
  '2002:a9fe:a9fe::1',
  '169.254.170.2',
  'fd00:ec2::254',
  'fd00:0ec2:0000:0000:0000:0000:0000:0254',
  '100.100.100.200',
  '168.63.129.16',
];

describe('classifyAddress', () => {
  it.each(PRIVATE)('%s is private (%s)', (address, range) => {
    expect(classifyAddress(address)).toEqual({ kind: 'private', range });
  });

  it.each(PUBLIC)('%s is public', (address) => {
    expect(classifyAddress(address)).toEqual({ kind: 'public' });
  });

  it.each(METADATA)('%s is a metadata endpoint', (address) => {
    expect(classifyAddress(address)).toEqual({ kind: 'metadata' });
  });

  it('rejects text that is not an IP address', () => {
    expect(() => classifyAddress('localhost')).toThrow(TypeError);
  });
});

describe('refusalOf', () => {
  it('refuses private addresses by default and allows them when the operator says so', () => {
    expect(refusalOf('192.168.1.10', { allowPrivate: false })).toEqual({
      kind: 'private',
      range: 'private-network',
    });
    expect(refusalOf('192.168.1.10', { allowPrivate: true })).toBeUndefined();
    expect(refusalOf('::ffff:7f00:1', { allowPrivate: true })).toBeUndefined();
  });

  it('refuses metadata endpoints even when private addresses are allowed', () => {
    for (const address of METADATA) {
      expect(refusalOf(address, { allowPrivate: true })).toEqual({ kind: 'metadata' });
    }
  });

  it('allows public addresses under either policy', () => {
    for (const address of PUBLIC) {
      expect(refusalOf(address, { allowPrivate: false })).toBeUndefined();
    }
  });
});
