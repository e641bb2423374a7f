"""The database: connections and the pool (`db`), forward-only migrations from `sql/` (`migrate`),
and the generated schema reference (`schema`)."""
