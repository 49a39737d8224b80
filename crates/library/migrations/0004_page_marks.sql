-- Where each page of a passage that crosses a page break starts in its
-- text ("offset:page,..."); NULL for a passage on one page. A search cites
-- the page of the part its query matches.
ALTER TABLE chunks ADD COLUMN page_marks TEXT;
