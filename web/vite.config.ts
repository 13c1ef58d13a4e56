import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

/**
 * The dashboard's build (issue #13): `web/` is the root, the output `web/dist` (served by the API
 * process, server/src/http/dashboard.ts). `vite --config web/vite.config.ts` serves it for
 * development with /api, /docs and /t proxied to a `npm start` on port 3000.
 */
export default defineConfig({
  root: import.meta.dirname,
  plugins: [react()],
  build: { outDir: 'dist', emptyOutDir: true, chunkSizeWarningLimit: 2000 },
  server: {
    proxy: Object.fromEntries(['/api', '/docs', '/t'].map((p) => [p, 'http://localhost:3000'])),
  },
});
