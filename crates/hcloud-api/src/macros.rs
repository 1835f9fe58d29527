//! A helper macro for the API's string enums.
//!
//! The API adds enum values over time. Every enum generated here keeps values it does not
//! know in an `Unknown(String)` variant instead of failing to decode, and serialises back to
//! exactly the string it came from.

/// Declares a string enum with a catch-all `Unknown(String)` variant.
macro_rules! string_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $value:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant, )+
            /// A value this client does not know (yet); the raw string is kept.
            Unknown(String),
        }

        impl $name {
            /// The wire representation of this value.
            pub fn as_str(&self) -> &str {
                match self {
                    $( Self::$variant => $value, )+
                    Self::Unknown(other) => other.as_str(),
                }
            }
        }

        impl ::std::default::Default for $name {
            /// An empty `Unknown` value, for building fixtures with `..Default::default()`.
            fn default() -> Self {
                Self::Unknown(String::new())
            }
        }

        impl ::std::convert::From<&str> for $name {
            fn from(value: &str) -> Self {
                match value {
                    $( $value => Self::$variant, )+
                    other => Self::Unknown(other.to_owned()),
                }
            }
        }

        impl ::std::convert::From<String> for $name {
            fn from(value: String) -> Self {
                match value.as_str() {
                    $( $value => Self::$variant, )+
                    _ => Self::Unknown(value),
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let raw = <String as ::serde::Deserialize>::deserialize(deserializer)?;
                Ok(Self::from(raw))
            }
        }
    };
}

pub(crate) use string_enum;
