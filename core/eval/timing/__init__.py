"""The timing room: where a rollout's time goes, computed from the board's records for every
front end to draw (the dashboard now, a report later): the waterfall of one rollout
(`waterfall`) and the distributions over many (`distributions`). No Textual here."""
