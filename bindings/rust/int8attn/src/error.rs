//! Status codes and the crate's error type.

use int8attn_sys as sys;
use std::ffi::CStr;
use std::fmt;

/// A status code of the C library (`int8attn_status_t`).
///
/// Values are stable and only ever appended, so this is a newtype rather than a closed enum;
/// the associated constants name every value the header defines. [`Status::ABI_MISMATCH`] is
/// the only value produced by these bindings rather than by the library.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Status(pub i32);

macro_rules! statuses {
    ($($name:ident = $sys:ident,)*) => {
        impl Status {
            $(
                #[doc = concat!("`", stringify!($sys), "`.")]
                pub const $name: Status = Status(sys::$sys as i32);
            )*
            fn const_name(self) -> Option<&'static str> {
                match self {
                    $(Status::$name => Some(stringify!($name)),)*
                    Status::ABI_MISMATCH => Some("ABI_MISMATCH"),
                    _ => None,
                }
            }
        }
    };
}

statuses! {
    OK = INT8ATTN_OK,
    INVALID_ARGUMENT = INT8ATTN_ERROR_INVALID_ARGUMENT,
    NULL_POINTER = INT8ATTN_ERROR_NULL_POINTER,
    BAD_SHAPE = INT8ATTN_ERROR_BAD_SHAPE,
    BAD_STRIDE = INT8ATTN_ERROR_BAD_STRIDE,
    BAD_DTYPE = INT8ATTN_ERROR_BAD_DTYPE,
    MISALIGNED = INT8ATTN_ERROR_MISALIGNED,
    BAD_STRUCT_SIZE = INT8ATTN_ERROR_BAD_STRUCT_SIZE,
    ALIASING = INT8ATTN_ERROR_ALIASING,
    BAD_DEVICE = INT8ATTN_ERROR_BAD_DEVICE,
    SIZE_OVERFLOW = INT8ATTN_ERROR_SIZE_OVERFLOW,
    CAPACITY_EXCEEDED = INT8ATTN_ERROR_CAPACITY_EXCEEDED,
    WORKSPACE_TOO_SMALL = INT8ATTN_ERROR_WORKSPACE_TOO_SMALL,
    BAD_VALUE = INT8ATTN_ERROR_BAD_VALUE,
    INVALID_HANDLE = INT8ATTN_ERROR_INVALID_HANDLE,
    NOT_SUPPORTED = INT8ATTN_ERROR_NOT_SUPPORTED,
    UNSUPPORTED_ARCH = INT8ATTN_ERROR_UNSUPPORTED_ARCH,
    UNSUPPORTED_HEAD_DIM = INT8ATTN_ERROR_UNSUPPORTED_HEAD_DIM,
    UNSUPPORTED_MODE = INT8ATTN_ERROR_UNSUPPORTED_MODE,
    BACKEND_UNAVAILABLE = INT8ATTN_ERROR_BACKEND_UNAVAILABLE,
    DEVICE = INT8ATTN_ERROR_DEVICE,
    OUT_OF_MEMORY = INT8ATTN_ERROR_OUT_OF_MEMORY,
    INTERNAL = INT8ATTN_ERROR_INTERNAL,
}

impl Status {
    /// Produced by these bindings (never by the library) when the loaded library's
    /// `int8attn_abi_version()` differs from the `INT8ATTN_ABI_VERSION` they were built for.
    pub const ABI_MISMATCH: Status = Status(-1);

    /// The raw value.
    pub fn code(self) -> i32 {
        self.0
    }

    /// `true` for [`Status::OK`].
    pub fn is_ok(self) -> bool {
        self.0 == 0
    }

    /// `true` for the invalid-argument group (1xx).
    pub fn is_invalid_argument(self) -> bool {
        (100..200).contains(&self.0)
    }

    /// `true` for the not-supported group (2xx).
    pub fn is_not_supported(self) -> bool {
        (200..300).contains(&self.0)
    }

    /// The library's short English description (`int8attn_status_string`).
    pub fn description(self) -> String {
        if self == Status::ABI_MISMATCH {
            return "ABI version mismatch between the bindings and the loaded library".into();
        }
        // SAFETY: int8attn_status_string accepts any value and returns a static, non-NULL,
        // NUL-terminated string.
        unsafe { c_str_lossy(sys::int8attn_status_string(self.0)) }
    }
}

impl fmt::Debug for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.const_name() {
            Some(n) => write!(f, "Status::{}({})", n, self.0),
            None => write!(f, "Status({})", self.0),
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.description(), self.0)
    }
}

/// An error from the library (or from these bindings' own argument checks): the status code
/// and the message `int8attn_last_error()` gave on the failing thread.
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    /// The status code (never [`Status::OK`]).
    pub status: Status,
    /// The library's message, naming the argument and the value that was wrong.
    pub message: String,
}

impl Error {
    /// An error with an explicit message (used for checks done in Rust before calling the
    /// library).
    pub fn new(status: Status, message: impl Into<String>) -> Self {
        Error { status, message: message.into() }
    }

    /// Build the error for `status` from the calling thread's `int8attn_last_error()`.
    pub(crate) fn from_last(status: i32) -> Self {
        // SAFETY: int8attn_last_error never returns NULL; the string stays valid until the next
        // library call on this thread, and we copy it immediately.
        let message = unsafe { c_str_lossy(sys::int8attn_last_error()) };
        Error { status: Status(status), message }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error").field("status", &self.status).field("message", &self.message).finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            write!(f, "int8attn: {}", self.status)
        } else {
            write!(f, "int8attn: {}: {}", self.status, self.message)
        }
    }
}

impl std::error::Error for Error {}

/// `Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// Turn a status into a `Result`, reading the thread's last error on failure.
#[inline]
pub(crate) fn check(status: i32) -> Result<()> {
    if status == 0 {
        Ok(())
    } else {
        Err(Error::from_last(status))
    }
}

/// Copy a C string (NULL gives "").
pub(crate) unsafe fn c_str_lossy(p: *const std::os::raw::c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}
