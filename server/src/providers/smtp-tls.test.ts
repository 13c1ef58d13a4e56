import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { SMTPServerAuthentication } from 'smtp-server';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestSmtpServer, type TestSmtpServer } from '../../test/helpers/smtp-server.ts';
import { createSmtpProvider, type SmtpConfig } from './smtp.ts';
import { ProviderError } from './types.ts';

/**
 * SMTP with real TLS (issue #10 "Done means"): STARTTLS and implicit TLS against smtp-server with a
 * certificate signed by a throw-away CA made here with openssl, trusted through the provider's
 * test-only `ca` option (so certificate verification stays on), plus AUTH.
 */

let dir: string;
let ca: string;
let key: string;
let cert: string;

/** A CA and a server certificate for 127.0.0.1 / localhost signed by it. */
function makeCertificates(): void {
  dir = mkdtempSync(path.join(tmpdir(), 'postwright-tls-'));
  const file = (name: string) => path.join(dir, name);
  const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'pipe' });
  openssl(
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '2',
    '-subj',
    '/CN=Postwright Test CA',
    '-keyout',
    file('ca.key'),
    '-out',
    file('ca.pem'),
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign',
  );
  openssl(
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-subj',
    '/CN=localhost',
    '-keyout',
    file('server.key'),
    '-out',
    file('server.csr'),
  );
  execFileSync(
    'sh',
    [
      '-c',
      `printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > ${file('ext.cnf')} && ` +
        `openssl x509 -req -in ${file('server.csr')} -CA ${file('ca.pem')} -CAkey ${file('ca.key')} ` +
        `-CAcreateserial -days 2 -extfile ${file('ext.cnf')} -out ${file('server.pem')}`,
    ],
    { stdio: 'pipe' },
  );
  ca = readFileSync(file('ca.pem'), 'utf8');
  key = readFileSync(file('server.key'), 'utf8');
  cert = readFileSync(file('server.pem'), 'utf8');
}

const logins: string[] = [];
const onAuth = (
  auth: SMTPServerAuthentication,
  _session: unknown,
  callback: (error: Error | null | undefined, response?: { user: string }) => void,
) => {
  if (auth.username === 'postwright' && auth.password === 's3cret') {
    logins.push(auth.username);
    return callback(null, { user: auth.username });
  }
  callback(Object.assign(new Error('Invalid username or password'), { responseCode: 535 }));
};

let starttls: TestSmtpServer;
let implicit: TestSmtpServer;

beforeAll(() => {
  makeCertificates();
});
// Every case gets SMTP servers of its own (as every test gets its own team, CONVENTIONS.md): what a
// server received is that case's alone. The CA and certificate are the file's.
beforeEach(async () => {
  starttls = await startTestSmtpServer({ disabledCommands: [], key, cert, onAuth });
  implicit = await startTestSmtpServer({ secure: true, disabledCommands: [], key, cert, onAuth });
});
afterEach(async () => {
  await starttls?.close();
  await implicit?.close();
});

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const LOCAL = { outbound: { allowPrivate: true } };

function provider(config: Partial<SmtpConfig> & { port: number }, trustCa = true) {
  return createSmtpProvider(
    { host: '127.0.0.1', username: 'postwright', password: 's3cret', ...config },
    { ...LOCAL, ...(trustCa ? { ca } : {}) },
  );
}

const email = {
  from: 'sender@example.test',
  to: ['to@example.test'],
  cc: ['cc@example.test'],
  bcc: ['hidden@example.test'],
  replyTo: ['reply@example.test'],
  subject: 'Over TLS',
  html: '<p>Encrypted</p>',
  text: 'Encrypted',
};

describe('smtp provider over TLS with a private CA', () => {
  it('STARTTLS: upgrades, verifies the certificate against the CA, authenticates and delivers', async () => {
    const smtp = provider({ port: starttls.port });
    try {
      const before = logins.length;
      await smtp.send(email);
      const [message] = await starttls.waitForMessages(1);
      expect(logins.length).toBe(before + 1);
      expect(message!.envelopeTo.sort()).toEqual([
        'cc@example.test',
        'hidden@example.test',
        'to@example.test',
      ]);
      expect(message!.parsed.subject).toBe('Over TLS');
      expect(message!.parsed.replyTo?.text).toBe('reply@example.test');
      expect(message!.parsed.headers.has('bcc')).toBe(false);
      expect((await smtp.verify()).success).toBe(true);
    } finally {
      await smtp.close();
    }
  });

  it('implicit TLS (secure): verifies the certificate, authenticates and delivers', async () => {
    const smtp = provider({ port: implicit.port, secure: true });
    try {
      await smtp.send({ ...email, subject: 'Implicit TLS' });
      const messages = await implicit.waitForMessages(1);
      expect(messages.at(-1)!.parsed.subject).toBe('Implicit TLS');
    } finally {
      await smtp.close();
    }
  });

  it('refuses the certificate without the CA and sends nothing', async () => {
    const smtp = provider({ port: implicit.port, secure: true }, false);
    const count = implicit.messages.length;
    try {
      const error = await smtp.send(email).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ProviderError);
      expect(implicit.messages.length).toBe(count);
    } finally {
      await smtp.close();
    }
  });

  it('a wrong password fails permanently, and verify says authentication failed', async () => {
    const smtp = provider({ port: starttls.port, password: 'wrong' });
    try {
      const error = (await smtp.send(email).catch((e: unknown) => e)) as ProviderError;
      expect(error).toBeInstanceOf(ProviderError);
      expect(error.permanent).toBe(true);
      const verified = await smtp.verify();
      expect(verified.success).toBe(false);
      expect(verified.message).toMatch(/authenticat/i);
    } finally {
      await smtp.close();
    }
  });
});
