import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { ProviderCache } from '../../providers/index.ts';
import { encryptConfig } from './adapter-crypto.ts';
import { providerFor } from './adapter-provider.ts';
import type { AdapterRow } from './adapters.repository.ts';

/** providerFor: one provider per adapter version, and no decryption on a cache hit (issue #10). */

const key = randomBytes(32);
const providers = new ProviderCache();
const deps = {
  providers,
  encryptionKey: key,
  config: { ADAPTER_MAX_CONNECTIONS: 2, SMTP_ALLOW_PRIVATE: false, SEND_TIMEOUT_SECONDS: 60 },
};

function row(id: string, updatedAt: Date, configEncrypted?: string): AdapterRow {
  const teamId = 'team_provider_for';
  return {
    id,
    teamId,
    name: 'Resend',
    type: 'mailapi_a',
    configEncrypted: configEncrypted ?? encryptConfig(key, { apiKey: 're_x' }, { teamId, adapterId: id }),
    defaultFrom: null,
    isDefault: true,
    isActive: true,
    fallbackAdapterId: null,
    createdAt: updatedAt,
    updatedAt,
  };
}

afterAll(() => providers.closeAll());

describe('providerFor', () => {
  it('reuses the cached provider of the same adapter version without decrypting its config', () => {
    const version = new Date('2026-11-23T10:00:00Z');
    const first = providerFor(deps, row('adapter_pf1', version));
    // Same id and version but a ciphertext that cannot be decrypted: a hit must not try.
    const again = providerFor(deps, row('adapter_pf1', version, 'v2:not-decryptable'));
    expect(again).toBe(first);
    // A new version is built again (and decrypted).
    expect(() =>
      providerFor(deps, row('adapter_pf1', new Date('2026-11-23T11:00:00Z'), 'v2:broken')),
    ).toThrow();
    const next = providerFor(deps, row('adapter_pf1', new Date('2026-11-23T12:00:00Z')));
    expect(next).not.toBe(first);
  });
});
