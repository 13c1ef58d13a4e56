import { Alert, Button, Code, Group, Paper, Select, Stack, Table, TextInput, Title } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { api, unwrap } from '../api/client';
import { useCan, useMe } from '../session';
import {
  ConfirmButton,
  EmptyState,
  ErrorAlert,
  fieldErrors,
  formatDate,
  Loading,
  notifyError,
  PageTitle,
} from '../ui';

const ROLES = ['owner', 'admin', 'member', 'viewer'] as const;
type Role = (typeof ROLES)[number];

/** Team: members with roles (change, remove), invitations (invite, revoke). */
export function TeamPage() {
  const can = useCan();
  const me = useMe().data;
  const queryClient = useQueryClient();
  const members = useQuery({ queryKey: ['members'], queryFn: () => unwrap(api.GET('/api/team/members')) });
  const invitations = useQuery({
    queryKey: ['invitations'],
    enabled: can('team:manage'),
    queryFn: () => unwrap(api.GET('/api/team/invitations')),
  });
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<Role>('member');
  const [link, setLink] = useState<string | null>(null);
  const invite = useMutation({
    mutationFn: () => unwrap(api.POST('/api/team/invitations', { body: { email, role } })),
    onSuccess: (inv) => {
      setEmail('');
      setLink(inv.url ?? null);
      queryClient.invalidateQueries({ queryKey: ['invitations'] });
    },
  });
  const changeRole = useMutation({
    mutationFn: (v: { userId: string; role: Role }) =>
      unwrap(
        api.PUT('/api/team/members/{userId}', {
          params: { path: { userId: v.userId } },
          body: { role: v.role },
        }),
      ),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: ['members'] }),
    onError: notifyError,
  });
  const removeMember = useMutation({
    mutationFn: (userId: string) =>
      unwrap(api.DELETE('/api/team/members/{userId}', { params: { path: { userId } } })),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: ['members'] }),
    onError: notifyError,
  });
  const revoke = useMutation({
    mutationFn: (id: string) =>
      unwrap(api.DELETE('/api/team/invitations/{id}', { params: { path: { id } } })),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: ['invitations'] }),
    onError: notifyError,
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    invite.mutate();
  };
  const manage = can('team:manage');
  return (
    <>
      <PageTitle>Team {me?.team.name}</PageTitle>
      <ErrorAlert error={members.error} />
      {members.isPending ? (
        <Loading />
      ) : (
        <Table.ScrollContainer minWidth={600}>
          <Table striped>
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Name</Table.Th>
                <Table.Th>Email</Table.Th>
                <Table.Th>Role</Table.Th>
                <Table.Th>Joined</Table.Th>
                <Table.Th />
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {(members.data ?? []).map((m) => (
                <Table.Tr key={m.userId}>
                  <Table.Td>{m.name}</Table.Td>
                  <Table.Td>{m.email}</Table.Td>
                  <Table.Td>
                    {manage && m.userId !== me?.user.id ? (
                      <Select
                        aria-label={`Role of ${m.email}`}
                        size="xs"
                        data={[...ROLES]}
                        value={m.role}
                        allowDeselect={false}
                        onChange={(v) => v && changeRole.mutate({ userId: m.userId, role: v as Role })}
                        w={120}
                      />
                    ) : (
                      m.role
                    )}
                  </Table.Td>
                  <Table.Td>{formatDate(m.joinedAt)}</Table.Td>
                  <Table.Td>
                    {manage && m.userId !== me?.user.id && (
                      <ConfirmButton
                        danger
                        question={`Remove ${m.email} from the team?`}
                        onConfirm={() => removeMember.mutate(m.userId)}
                      >
                        Remove
                      </ConfirmButton>
                    )}
                  </Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      )}
      {manage && (
        <Paper withBorder p="md" mt="md">
          <Title order={4} mb="sm">
            Invite a member
          </Title>
          <form onSubmit={submit}>
            <Stack>
              <ErrorAlert error={invite.error} />
              <Group align="end">
                <TextInput
                  label="Email"
                  type="email"
                  required
                  value={email}
                  onChange={(e) => setEmail(e.currentTarget.value)}
                  error={fieldErrors(invite.error).email}
                />
                <Select
                  label="Role"
                  data={[...ROLES]}
                  value={role}
                  onChange={(v) => v && setRole(v as Role)}
                  allowDeselect={false}
                  w={140}
                />
                <Button type="submit" loading={invite.isPending}>
                  Invite
                </Button>
              </Group>
              {invite.data && (
                <Alert color="green">
                  Invitation created for {invite.data.email}.{' '}
                  {invite.data.delivery.status === 'queued'
                    ? 'An email with the link is on its way.'
                    : `No email was sent (${invite.data.delivery.reason ?? 'no adapter'}): share the invitation link yourself.`}
                  {link && (
                    <Code block mt="xs" data-testid="invitation-link">
                      {link}
                    </Code>
                  )}
                </Alert>
              )}
            </Stack>
          </form>
          <Title order={4} mt="lg" mb="sm">
            Pending invitations
          </Title>
          <ErrorAlert error={invitations.error} />
          {invitations.data?.length === 0 ? (
            <EmptyState>No pending invitation.</EmptyState>
          ) : (
            <Table>
              <Table.Tbody>
                {(invitations.data ?? []).map((i) => (
                  <Table.Tr key={i.id}>
                    <Table.Td>{i.email}</Table.Td>
                    <Table.Td>{i.role}</Table.Td>
                    <Table.Td>expires {formatDate(i.expiresAt)}</Table.Td>
                    <Table.Td>
                      <Button size="xs" variant="subtle" color="red" onClick={() => revoke.mutate(i.id)}>
                        Revoke
                      </Button>
                    </Table.Td>
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
          )}
        </Paper>
      )}
    </>
  );
}
