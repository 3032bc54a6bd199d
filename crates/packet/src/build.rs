//! Frame builders for tests, fixtures and traffic generators (owned `Repr`s written into buffers).
