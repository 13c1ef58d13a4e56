import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/**
 * A self-signed RSA certificate and its key (PEM), standing in for Amazon SNS's signing
 * certificate in tests (made with the machine's `openssl`, valid for a day).
 */
export function selfSignedSnsCertificate(): { certPem: string; keyPem: string } {
  const dir = mkdtempSync(path.join(tmpdir(), 'sns-cert-'));
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-days',
        '1',
        '-subj',
        '/CN=sns.amazonaws.com',
        '-keyout',
        path.join(dir, 'key.pem'),
        '-out',
        path.join(dir, 'cert.pem'),
      ],
      { stdio: 'ignore' },
    );
    return {
      certPem: readFileSync(path.join(dir, 'cert.pem'), 'utf8'),
      keyPem: readFileSync(path.join(dir, 'key.pem'), 'utf8'),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
