import { describe, expect, it } from 'vitest';
import { isSnsUrl } from './ses.events.ts';

describe('isSnsUrl (the only URLs the SNS handler fetches)', () => {
  it.each([
    'https://sns.us-east-1.amazonaws.com/SimpleNotificationService-0000.pem',
    'https://sns.eu-west-1.amazonaws.com/?Action=ConfirmSubscription&TopicArn=x&Token=y',
    'https://sns.cn-north-1.amazonaws.com.cn/SimpleNotificationService-1.pem',
  ])('accepts %s', (url) => {
    expect(isSnsUrl(url, undefined)).toBe(true);
  });

  it.each([
    'http://sns.us-east-1.amazonaws.com/cert.pem',
    'https://sns.us-east-1.amazonaws.com.evil.example/cert.pem',
    'https://evil.example/sns.us-east-1.amazonaws.com/cert.pem',
    'https://sns.us-east-1.amazonaws.com:8443/cert.pem',
    'https://s3.amazonaws.com/cert.pem',
    'https://user:pw@sns.us-east-1.amazonaws.com/cert.pem',
    'http://169.254.169.254/latest/meta-data/',
    'not a url',
  ])('refuses %s', (url) => {
    expect(isSnsUrl(url, undefined)).toBe(false);
  });

  it('accepts the operator override origin only, not other local origins', () => {
    expect(isSnsUrl('http://127.0.0.1:9000/cert.pem', 'http://127.0.0.1:9000')).toBe(true);
    expect(isSnsUrl('http://127.0.0.1:9001/cert.pem', 'http://127.0.0.1:9000')).toBe(false);
  });
});
