-- The manifest template a task conversation was made from (its `key`), so
-- apps find "werewolf-chat" by key rather than by display name.
ALTER TABLE conversations ADD COLUMN template_key TEXT;
