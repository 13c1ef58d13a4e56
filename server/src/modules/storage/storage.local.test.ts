import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { text } from 'node:stream/consumers';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isValidStorageKey } from './storage.key.ts';
import { LocalDiskStorage } from './storage.local.ts';

describe('storage keys', () => {
  it.each(['team_1/img_1.png', 'a', 'a/b/c.d.e', 'A-b_c/0.x'])('accepts %s', (key) => {
    expect(isValidStorageKey(key)).toBe(true);
  });

  it.each([
    '',
    '..',
    '../x',
    'a/../b',
    'a/./b',
    '/etc/passwd',
    'a//b',
    'a/',
    'a\\b',
    '..\\x',
    '.hidden',
    'a/.x.meta.json',
    'a b',
    'a/%2e%2e',
    'ü',
    'a\u0000b',
    'x'.repeat(201),
    `${'a/'.repeat(8)}a`,
  ])('refuses %j', (key) => {
    expect(isValidStorageKey(key)).toBe(false);
  });
});

describe('LocalDiskStorage', () => {
  let parent: string;
  let storage: LocalDiskStorage;

  beforeEach(() => {
    parent = mkdtempSync(path.join(tmpdir(), 'postwright-storage-test-'));
    storage = new LocalDiskStorage({
      root: path.join(parent, 'files'),
      publicBaseUrl: 'https://pw.test/files/',
    });
  });
  afterEach(() => rmSync(parent, { recursive: true, force: true }));

  it('stores, reads back with the content type and size, and deletes', async () => {
    await storage.put('team_1/a.txt', Buffer.from('hello'), 'text/plain');
    const file = await storage.get('team_1/a.txt');
    expect(file).toMatchObject({ contentType: 'text/plain', size: 5 });
    expect(await text(file!.body)).toBe('hello');
    expect(storage.publicUrl('team_1/a.txt')).toBe('https://pw.test/files/team_1/a.txt');

    expect(await storage.delete('team_1/a.txt')).toBe(true);
    expect(await storage.get('team_1/a.txt')).toBeUndefined();
    expect(await storage.delete('team_1/a.txt')).toBe(false);
    expect(readdirSync(path.join(parent, 'files', 'team_1'))).toEqual([]);
  });

  it('never reads, writes or deletes outside its root', async () => {
    writeFileSync(path.join(parent, 'secret.txt'), 'secret');
    for (const key of ['../secret.txt', 'x/../../secret.txt', `${parent}/secret.txt`, '.']) {
      expect(await storage.get(key)).toBeUndefined();
      expect(await storage.delete(key)).toBe(false);
      await expect(storage.put(key, Buffer.from('x'), 'text/plain')).rejects.toThrow(/invalid storage key/);
    }
    expect(existsSync(path.join(parent, 'secret.txt'))).toBe(true);
  });

  it('treats a directory as no file', async () => {
    await storage.put('team_1/a.png', Buffer.from('x'), 'image/png');
    expect(await storage.get('team_1')).toBeUndefined();
    expect(await storage.delete('team_1')).toBe(false);
  });

  it('removes a temporary root on close, and only then', async () => {
    const root = path.join(parent, 'temp-root');
    const temporary = new LocalDiskStorage({ root, publicBaseUrl: 'http://x/files', removeOnClose: true });
    await temporary.put('a/b.png', Buffer.from('x'), 'image/png');
    await temporary.close();
    expect(existsSync(root)).toBe(false);

    await storage.put('a/b.png', Buffer.from('x'), 'image/png');
    await storage.close();
    expect(existsSync(path.join(parent, 'files', 'a', 'b.png'))).toBe(true);
  });
});
