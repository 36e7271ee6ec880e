-- +goose Up

-- Tool names are canonical: matched in lower case, so a rule's tool pattern
-- must be lower case to compile. Stored policies written before this keep
-- their meaning with their patterns lowered (a submitted "Payments.send" is
-- now "payments.send"); without it they would no longer compile and their
-- agents could submit nothing. Actions keep the tool they were stored with.
UPDATE policies p
SET document = jsonb_set(p.document, '{rules}', (
    SELECT jsonb_agg(
        CASE WHEN jsonb_typeof(r->'tool') = 'string'
             THEN jsonb_set(r, '{tool}', to_jsonb(lower(r->>'tool')))
             ELSE r END
        ORDER BY i)
    FROM jsonb_array_elements(p.document->'rules') WITH ORDINALITY AS e(r, i)))
WHERE jsonb_typeof(p.document->'rules') = 'array'
  AND jsonb_array_length(p.document->'rules') > 0
  AND EXISTS (SELECT 1 FROM jsonb_array_elements(p.document->'rules') AS e(r)
              WHERE r->>'tool' <> lower(r->>'tool'));

-- +goose Down
-- Lowering is not undone: the lowered patterns match what the old ones did.
SELECT 1;
