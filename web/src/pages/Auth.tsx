import {
  Alert,
  Anchor,
  Button,
  Center,
  Divider,
  Paper,
  PasswordInput,
  Stack,
  Text,
  TextInput,
  Title,
} from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, type ReactNode, useState } from 'react';
import { useNavigate, useParams, useSearchParams } from 'react-router';
import { api, rawJson, unwrap } from '../api/client';
import { useMe } from '../session';
import { ErrorAlert, fieldErrors, Loading } from '../ui';

/**
 * The sign-in alert's text for `?error=<code>`: ours for a known code, else a generic one naming the
 * code when it looks like one (lower-case snake_case, as better-auth's and ours are: no dots, so no
 * host name). Never the URL's other text (`error_description`): anyone can link
 * here, and the red "Sign-in refused" alert showed their sentence as ours (review finding,
 * session 14: "Postwright moved: sign in at https://…").
 */
function signInErrorMessage(code: string): string {
  const known = Object.hasOwn(SIGN_IN_ERRORS, code) ? SIGN_IN_ERRORS[code] : undefined;
  if (known) return known;
  return /^[a-z0-9_]{1,64}$/.test(code) ? `The sign-in failed (${code}).` : 'The sign-in failed.';
}

/** What the `?error=` codes of a refused sign-in (server: sign-up-policy.ts, better-auth) mean. */
export const SIGN_IN_ERRORS: Record<string, string> = {
  invitation_required:
    'This account is not a member of any team yet. Ask a team owner or admin for an invitation, then open its link.',
  email_not_verified:
    'The provider did not confirm that this email address is verified. Verify it with the provider and try again.',
  setup_token_required:
    'No account exists yet. Open the setup link printed by the server at start to create the first owner.',
  setup_already_done: 'Setup is already done: the setup link works only once. Sign in instead.',
  account_not_linked:
    'An account with this email exists but is not linked to this provider. Sign in with its usual method.',
  state_mismatch: 'The sign-in took too long or was started in another tab. Please try again.',
  please_restart_the_process: 'The sign-in could not be completed. Please try again.',
  unable_to_get_user_info: 'The provider did not give us your profile. Please try again.',
};

/**
 * A same-origin path to go to after signing in (never another site): `value` when it is a path of
 * this origin, else `/`. Control characters are refused first (a browser drops tabs and newlines
 * from URLs, so `/\t/evil.example` passed as a path and resolved to `//evil.example`, review
 * finding, session 14), then the path must resolve to this origin, as the server's check does.
 */
function safeRedirect(value: string | null): string {
  if (!value?.startsWith('/') || value.startsWith('//') || value.includes('\\')) return '/';
  for (const character of value) {
    const code = character.charCodeAt(0);
    if (code < 0x20 || code === 0x7f) return '/';
  }
  try {
    const resolved = new URL(value, window.location.origin);
    return resolved.origin === window.location.origin
      ? `${resolved.pathname}${resolved.search}${resolved.hash}`
      : '/';
  } catch {
    return '/';
  }
}

function AuthCard({ title, children }: { title: string; children: ReactNode }) {
  return (
    <Center mih="100vh" p="md">
      <Paper withBorder p="xl" w={420} maw="100%">
        <Title order={2} mb="md">
          {title}
        </Title>
        {children}
      </Paper>
    </Center>
  );
}

/** `/setup?token=…`: the printed first-run link creates the first owner and team. */
export function SetupPage() {
  const [params] = useSearchParams();
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const token = params.get('token') ?? '';
  const status = useQuery({ queryKey: ['setup'], queryFn: () => unwrap(api.GET('/api/auth/setup')) });
  const [form, setForm] = useState({ name: '', email: '', password: '', teamName: '' });
  const setup = useMutation({
    mutationFn: () => unwrap(api.POST('/api/auth/setup', { body: { token, ...form } })),
    onSuccess: async () => {
      await queryClient.resetQueries({ queryKey: ['me'] });
      navigate('/');
    },
  });
  const errors = fieldErrors(setup.error);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    setup.mutate();
  };
  if (status.isPending) return <Loading />;
  if (status.data && !status.data.required) {
    return (
      <AuthCard title="Setup done">
        <Text mb="md">An owner already exists. Sign in to continue.</Text>
        <Anchor href="/login">Go to sign-in</Anchor>
      </AuthCard>
    );
  }
  const field = (key: keyof typeof form) => ({
    value: form[key],
    onChange: (e: React.ChangeEvent<HTMLInputElement>) => setForm({ ...form, [key]: e.currentTarget.value }),
    error: errors[key],
    required: true,
  });
  return (
    <AuthCard title="Set up Postwright">
      {!token && (
        <Alert color="orange" mb="md">
          This page needs the setup link printed by the server at start (it ends in <code>?token=…</code>).
        </Alert>
      )}
      <form onSubmit={submit}>
        <Stack>
          <Text size="sm" c="dimmed">
            Create the first owner account and its team.
          </Text>
          <ErrorAlert error={setup.error} />
          <TextInput label="Your name" autoComplete="name" {...field('name')} />
          <TextInput label="Email" type="email" autoComplete="email" {...field('email')} />
          <PasswordInput
            label="Password"
            description="At least 8 characters"
            autoComplete="new-password"
            {...field('password')}
          />
          <TextInput label="Team name" {...field('teamName')} />
          <Button type="submit" loading={setup.isPending} disabled={!token}>
            Create owner and team
          </Button>
        </Stack>
      </form>
    </AuthCard>
  );
}

/** `/login`: password form and one button per enabled provider; explains `?error=` codes. */
export function LoginPage() {
  const [params] = useSearchParams();
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const redirectTo = safeRedirect(params.get('redirectTo'));
  const error = params.get('error');
  const providers = useQuery({
    queryKey: ['providers'],
    queryFn: () => unwrap(api.GET('/api/auth/providers')),
  });
  const setupStatus = useQuery({ queryKey: ['setup'], queryFn: () => unwrap(api.GET('/api/auth/setup')) });
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const signIn = useMutation({
    mutationFn: () => rawJson('POST', '/api/auth/sign-in/email', { email, password }),
    onSuccess: async () => {
      await queryClient.resetQueries();
      navigate(redirectTo);
    },
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    signIn.mutate();
  };
  const list = providers.data ?? [];
  const hasPassword = list.some((p) => p.type === 'password');
  const oauth = list.filter((p) => p.type === 'oauth');
  return (
    <AuthCard title="Sign in">
      <Stack>
        {error && (
          <Alert color="red" title="Sign-in refused" role="alert">
            {signInErrorMessage(error)}
          </Alert>
        )}
        {setupStatus.data?.required && (
          <Alert color="blue">
            No account exists yet: open the setup link printed by the server at start to create the first
            owner.
          </Alert>
        )}
        <ErrorAlert error={providers.error} />
        {hasPassword && (
          <form onSubmit={submit}>
            <Stack>
              <ErrorAlert error={signIn.error} title="Sign-in failed" />
              <TextInput
                label="Email"
                type="email"
                autoComplete="email"
                required
                value={email}
                onChange={(e) => setEmail(e.currentTarget.value)}
              />
              <PasswordInput
                label="Password"
                autoComplete="current-password"
                required
                value={password}
                onChange={(e) => setPassword(e.currentTarget.value)}
              />
              <Button type="submit" loading={signIn.isPending}>
                Sign in
              </Button>
            </Stack>
          </form>
        )}
        {hasPassword && oauth.length > 0 && <Divider label="or" />}
        {oauth.map((p) => (
          <Button
            key={p.id}
            component="a"
            variant="default"
            href={`/api/auth/sign-in/${p.id}?redirectTo=${encodeURIComponent(redirectTo)}`}
          >
            Continue with {p.name}
          </Button>
        ))}
      </Stack>
    </AuthCard>
  );
}

/** `/invite/:token`: accept an invitation, signed in or creating the account. */
export function InvitePage() {
  const { token = '' } = useParams();
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const me = useMe();
  const invitation = useQuery({
    queryKey: ['invitation', token],
    queryFn: () => unwrap(api.GET('/api/auth/invitations/{token}', { params: { path: { token } } })),
  });
  const [name, setName] = useState('');
  const [password, setPassword] = useState('');
  const accept = useMutation({
    mutationFn: (withAccount: boolean) =>
      unwrap(
        api.POST('/api/auth/invitations/{token}/accept', {
          params: { path: { token } },
          body: withAccount ? { name, password } : null,
        }),
      ),
    onSuccess: async () => {
      await queryClient.resetQueries();
      navigate('/');
    },
  });
  const signOut = useMutation({
    mutationFn: () => rawJson('POST', '/api/auth/sign-out', {}),
    // Signed out, the page offers to sign in as, or create, the invited account.
    onSuccess: () => queryClient.resetQueries(),
  });
  if (invitation.isPending || me.isPending) return <Loading />;
  if (invitation.error) {
    return (
      <AuthCard title="Invitation">
        <ErrorAlert error={invitation.error} title="This invitation cannot be used" />
      </AuthCard>
    );
  }
  const inv = invitation.data;
  const errors = fieldErrors(accept.error);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    accept.mutate(true);
  };
  return (
    <AuthCard title={`Join ${inv.team.name}`}>
      <Stack>
        <Text>
          {inv.inviterName} invited <b>{inv.email}</b> to join <b>{inv.team.name}</b> as <b>{inv.role}</b>.
        </Text>
        <ErrorAlert error={accept.error ?? signOut.error} />
        {me.data && me.data.user.email.toLowerCase() !== inv.email.toLowerCase() ? (
          // The server refuses another account (403 WRONG_ACCOUNT): say so rather than offer Accept
          // (review finding, dashboard session: it said "Your role … does not allow this").
          <>
            <Text size="sm">
              This invitation is for {inv.email}, but you are signed in as {me.data.user.email}. Sign out,
              then sign in as {inv.email} (or create that account) to accept it.
            </Text>
            <Button onClick={() => signOut.mutate()} loading={signOut.isPending}>
              Sign out
            </Button>
          </>
        ) : me.data ? (
          <>
            <Text size="sm">Signed in as {me.data.user.email}.</Text>
            <Button onClick={() => accept.mutate(false)} loading={accept.isPending}>
              Accept invitation
            </Button>
          </>
        ) : (
          <form onSubmit={submit}>
            <Stack>
              <Text size="sm" c="dimmed">
                Create your account for {inv.email}, or{' '}
                <Anchor href={`/login?redirectTo=/invite/${token}`}>sign in</Anchor> if you already have one.
              </Text>
              <TextInput
                label="Your name"
                required
                value={name}
                onChange={(e) => setName(e.currentTarget.value)}
                error={errors.name}
              />
              <PasswordInput
                label="Password"
                description="At least 8 characters"
                required
                autoComplete="new-password"
                value={password}
                onChange={(e) => setPassword(e.currentTarget.value)}
                error={errors.password}
              />
              <Button type="submit" loading={accept.isPending}>
                Create account and join
              </Button>
            </Stack>
          </form>
        )}
      </Stack>
    </AuthCard>
  );
}
