/** The key createTestContext encrypts with (adapter configs, webhook secrets); CLI processes of a test get it too. */
export const TEST_ENCRYPTION_KEY = Buffer.alloc(32, 7);
