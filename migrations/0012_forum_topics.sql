-- Forum topics: a message sent in a topic of a forum supergroup belongs to the conversation
-- `tg:<chat>/<thread>`. The topic is kept beside the stored update so that a group's unaddressed
-- messages are given as context only to an answer in the same topic.

-- The update's forum topic (`message_thread_id` of a topic message); NULL outside topics.
ALTER TABLE inbound_updates ADD COLUMN thread_id INTEGER;
