import { getAuthTables } from 'better-auth/db';
import { getTableColumns } from 'drizzle-orm';
import type { PgTable } from 'drizzle-orm/pg-core';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../config.ts';
import type { DatabaseHandle } from '../../db/client.ts';
import * as schema from '../../db/schema/auth.ts';
import { createAuth } from './better-auth.ts';

/**
 * better-auth throws at run time when its configuration needs a table or column our Drizzle schema
 * lacks (ARCHITECTURE.md "Auth notes"). This compares the two for the configuration we run.
 */
describe('auth schema', () => {
  const auth = createAuth({
    config: loadConfig({ LOG_LEVEL: 'silent' }),
    database: {
      db: {} as never,
      pool: {} as never,
      connectionString: 'postgres://unused',
      close: async () => {},
    } as DatabaseHandle,
    encryptionKey: Buffer.alloc(32, 1),
  });
  const required = Object.values(getAuthTables(auth.options));

  it('has a table for every model better-auth is configured with', () => {
    const exported = Object.keys(schema);
    for (const model of required) {
      expect(exported, `model ${model.modelName}`).toContain(model.modelName);
    }
    expect(required.map((m) => m.modelName).sort()).toEqual(
      ['accounts', 'invitations', 'members', 'sessions', 'teams', 'users', 'verifications'].sort(),
    );
  });

  it('has a column for every field of every model', () => {
    for (const model of required) {
      const table = (schema as Record<string, PgTable>)[model.modelName];
      expect(table, model.modelName).toBeDefined();
      const columns = Object.keys(getTableColumns(table!));
      for (const [field, attributes] of Object.entries(model.fields)) {
        expect(columns, `${model.modelName}.${field}`).toContain(attributes.fieldName ?? field);
      }
    }
  });
});
