import {
  AppShell,
  Burger,
  Button,
  Group,
  Modal,
  NavLink,
  Select,
  Stack,
  Text,
  TextInput,
  Title,
} from '@mantine/core';
import { useDisclosure } from '@mantine/hooks';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { lazy, Suspense, useState } from 'react';
import { Link, Navigate, Outlet, Route, Routes, useLocation, useNavigate } from 'react-router';
import { ApiError, api, rawJson, unwrap } from './api/client';
import { InvitePage, LoginPage, SetupPage } from './pages/Auth';
import { useMe } from './session';
import { ErrorAlert, fieldErrors, Loading, MutationForm, notifyError } from './ui';

// The signed-in pages load on first visit: the sign-in and setup pages need neither them nor the charts.
const named = <K extends string>(load: () => Promise<Record<K, React.ComponentType>>, name: K) =>
  lazy(async () => ({ default: (await load())[name] }));
const AdaptersPage = named(() => import('./pages/Adapters'), 'AdaptersPage');
const ApiKeysPage = named(() => import('./pages/ApiKeys'), 'ApiKeysPage');
const LogsPage = named(() => import('./pages/Logs'), 'LogsPage');
const LogDetailPage = named(() => import('./pages/Logs'), 'LogDetailPage');
const OverviewPage = named(() => import('./pages/Overview'), 'OverviewPage');
const TeamPage = named(() => import('./pages/Team'), 'TeamPage');
const TemplatesPage = named(() => import('./pages/Templates'), 'TemplatesPage');
const WebhooksPage = named(() => import('./pages/Webhooks'), 'WebhooksPage');

/** Client routes; the server answers index.html for each of them (server/src/http/dashboard.ts). */
export function App() {
  return (
    <Routes>
      <Route path="/setup" element={<SetupPage />} />
      <Route path="/login" element={<LoginPage />} />
      <Route path="/invite/:token" element={<InvitePage />} />
      <Route element={<SignedIn />}>
        <Route index element={<OverviewPage />} />
        <Route path="/templates" element={<TemplatesPage />} />
        <Route path="/logs" element={<LogsPage />} />
        <Route path="/logs/:id" element={<LogDetailPage />} />
        <Route path="/adapters" element={<AdaptersPage />} />
        <Route path="/api-keys" element={<ApiKeysPage />} />
        <Route path="/webhooks" element={<WebhooksPage />} />
        <Route path="/team" element={<TeamPage />} />
        <Route path="*" element={<Text>Page not found.</Text>} />
      </Route>
    </Routes>
  );
}

const NAV = [
  { to: '/', label: 'Overview' },
  { to: '/templates', label: 'Templates' },
  { to: '/logs', label: 'Logs' },
  { to: '/adapters', label: 'Adapters' },
  { to: '/api-keys', label: 'API keys' },
  { to: '/webhooks', label: 'Webhooks' },
  { to: '/team', label: 'Team' },
];

/** The signed-in shell: navigation, team switcher, create team, sign-out; /login when signed out. */
function SignedIn() {
  const me = useMe();
  const location = useLocation();
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const [opened, { toggle, close }] = useDisclosure();
  const [creating, setCreating] = useState(false);

  const switchTeam = useMutation({
    mutationFn: (teamId: string) => unwrap(api.POST('/api/auth/switch-team', { body: { teamId } })),
    onSuccess: () => queryClient.resetQueries(),
    onError: notifyError,
  });
  const signOut = useMutation({
    mutationFn: () => rawJson('POST', '/api/auth/sign-out', {}),
    onSuccess: () => {
      queryClient.clear();
      navigate('/login');
    },
    onError: notifyError,
  });

  if (me.isPending) return <Loading />;
  if (me.error instanceof ApiError && me.error.details?.reason === 'NO_TEAM') {
    // Left, or removed from, their last team: they may still create one (or sign out).
    return (
      <Stack maw={480} mx="auto" mt="xl" p="md">
        <Title order={3}>You are not a member of any team</Title>
        <Text>Ask a team owner for an invitation, or create a team of your own.</Text>
        <Group>
          <Button onClick={() => setCreating(true)}>Create a team</Button>
          <Button variant="default" onClick={() => signOut.mutate()} loading={signOut.isPending}>
            Sign out
          </Button>
        </Group>
        <CreateTeamModal opened={creating} onClose={() => setCreating(false)} />
      </Stack>
    );
  }
  if (me.error) return <ErrorAlert error={me.error} />;
  if (!me.data) {
    const back = location.pathname + location.search;
    return (
      <Navigate to={back === '/' ? '/login' : `/login?redirectTo=${encodeURIComponent(back)}`} replace />
    );
  }
  const data = me.data;
  return (
    <AppShell
      header={{ height: 56 }}
      navbar={{ width: 220, breakpoint: 'sm', collapsed: { mobile: !opened } }}
      padding="md"
    >
      <AppShell.Header>
        <Group h="100%" px="md" justify="space-between" wrap="nowrap">
          <Group wrap="nowrap">
            <Burger opened={opened} onClick={toggle} hiddenFrom="sm" size="sm" aria-label="Menu" />
            <Text fw={700}>Postwright</Text>
          </Group>
          <Group wrap="nowrap" gap="xs">
            <Select
              aria-label="Team"
              size="xs"
              data={data.teams.map((t) => ({ value: t.id, label: `${t.name} (${t.role})` }))}
              value={data.team.id}
              onChange={(value) => value && value !== data.team.id && switchTeam.mutate(value)}
              allowDeselect={false}
              maw={{ base: 130, sm: 240 }}
            />
            <Button size="xs" variant="default" onClick={() => setCreating(true)} visibleFrom="sm">
              New team
            </Button>
            <Text size="sm" visibleFrom="sm" title={data.user.email}>
              {data.user.name}
            </Text>
            <Button size="xs" variant="subtle" onClick={() => signOut.mutate()} loading={signOut.isPending}>
              Sign out
            </Button>
          </Group>
        </Group>
      </AppShell.Header>
      <AppShell.Navbar p="xs">
        {NAV.map((item) => (
          <NavLink
            key={item.to}
            component={Link}
            to={item.to}
            label={item.label}
            onClick={close}
            active={item.to === '/' ? location.pathname === '/' : location.pathname.startsWith(item.to)}
          />
        ))}
        <NavLink label="New team" onClick={() => setCreating(true)} hiddenFrom="sm" />
      </AppShell.Navbar>
      <AppShell.Main>
        {/* Keyed by team: a team changed under the page (another tab) also closes the forms and
            clears the state its page held for the previous team. */}
        <Suspense key={data.team.id} fallback={<Loading />}>
          <Outlet />
        </Suspense>
      </AppShell.Main>
      <CreateTeamModal opened={creating} onClose={() => setCreating(false)} />
    </AppShell>
  );
}

function CreateTeamModal({ opened, onClose }: { opened: boolean; onClose: () => void }) {
  const queryClient = useQueryClient();
  const [name, setName] = useState('');
  const create = useMutation({
    mutationFn: async () => {
      const team = await unwrap(api.POST('/api/teams', { body: { name } }));
      await unwrap(api.POST('/api/auth/switch-team', { body: { teamId: team.id } }));
    },
    onSuccess: () => {
      setName('');
      onClose();
      queryClient.resetQueries();
    },
  });
  return (
    <Modal opened={opened} onClose={onClose} title="Create a team">
      <MutationForm mutation={create} submitLabel="Create and switch">
        <TextInput
          label="Team name"
          required
          value={name}
          onChange={(e) => setName(e.currentTarget.value)}
          error={fieldErrors(create.error).name}
        />
      </MutationForm>
    </Modal>
  );
}
