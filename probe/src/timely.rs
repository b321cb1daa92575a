//! (being written: the timely adapter)
