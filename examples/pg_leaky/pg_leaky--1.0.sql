CREATE FUNCTION remember_name(text) RETURNS int
AS 'MODULE_PATHNAME', 'remember_name' LANGUAGE C STRICT;
