-- A `clientInvocationId` is the actor's per command (ADR 0027 §4): the same
-- id on another command is another invoke, never the first one's duplicate.
DROP INDEX command_invocations_client;
CREATE UNIQUE INDEX command_invocations_client
    ON command_invocations (actor_id, command_id, client_invocation_id)
    WHERE client_invocation_id IS NOT NULL;
