import '@mantine/core/styles.css';
import '@mantine/charts/styles.css';
import '@mantine/notifications/styles.css';
import { MantineProvider } from '@mantine/core';
import { Notifications } from '@mantine/notifications';
import { MutationCache, QueryCache, QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { BrowserRouter } from 'react-router';
import { App } from './App';
import { ApiError } from './api/client';
import { syncSessionAcrossTabs } from './team-sync';

// Failed calls that mean the session changed elsewhere (signed out, team switched or revoked).
let onSessionError: (error: unknown) => void = () => undefined;
const queryClient = new QueryClient({
  queryCache: new QueryCache({ onError: (error) => onSessionError(error) }),
  mutationCache: new MutationCache({ onError: (error) => onSessionError(error) }),
  defaultOptions: {
    queries: {
      // A 4xx will not change by asking again (401, 403, 404).
      retry: (count, error) => !(error instanceof ApiError && error.status < 500) && count < 2,
      refetchOnWindowFocus: false,
    },
  },
});
onSessionError = syncSessionAcrossTabs(queryClient);

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <MantineProvider>
      <Notifications />
      <QueryClientProvider client={queryClient}>
        <BrowserRouter>
          <App />
        </BrowserRouter>
      </QueryClientProvider>
    </MantineProvider>
  </StrictMode>,
);
