import { execFileSync } from 'node:child_process';
import { createSign } from 'node:crypto';
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

/**
 * Signs SNS `message` (its fields as strings) as Amazon SNS does, with `keyPem`: the string to
 * sign is the message's fields of its type in SNS's order, `Name\nvalue\n` each; SignatureVersion
 * 1 = SHA1withRSA, 2 = SHA256withRSA. Sets `message.Signature` (base64) and returns the message.
 */
export function signSnsMessage(message: Record<string, string>, keyPem: string): Record<string, string> {
  const order =
    message.Type === 'Notification'
      ? ['Message', 'MessageId', 'Subject', 'Timestamp', 'TopicArn', 'Type']
      : ['Message', 'MessageId', 'SubscribeURL', 'Timestamp', 'Token', 'TopicArn', 'Type'];
  const text = order
    .filter((name) => message[name] !== undefined)
    .map((name) => `${name}\n${message[name]}\n`)
    .join('');
  message.Signature = createSign(message.SignatureVersion === '1' ? 'RSA-SHA1' : 'RSA-SHA256')
    .update(text)
    .sign(keyPem, 'base64');
  return message;
}
