"""SQL expression text in a Spark Connect plan (`selectExpr`, `expr`, `filter` with a string) as
the node types of `expressions`.

The parser reads Spark's expression grammar only as far as lineage needs it: every binary
operator and predicate is a transformation of its operands, so operator precedence does not
matter; what does (function calls and their arguments, CASE, CAST, OVER, lambdas, aliases, the
keywords some functions take in place of arguments) is parsed exactly. Text it does not
understand becomes an `Opaque` node, which makes the lineage incomplete rather than wrong.
"""

from __future__ import annotations

from dws_dagster.spark.connect.expressions import (
    CAST,
    EXTRACT,
    LAMBDA,
    OPERATOR,
    ROW,
    Alias,
    Attr,
    Call,
    Expr,
    Lit,
    Opaque,
    Over,
    Star,
)
from dws_dagster.spark.connect.sql_tokens import (
    BINARY_SYMBOLS,
    BINARY_WORDS,
    INTERVAL_UNITS,
    NILADIC,
    STOPS,
    TYPED_LITERALS,
    UNIT_FIRST,
    SqlSyntaxError,
    Token,
    tokenize,
)


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = tokenize(text)
        self.position = 0
        self.lambda_names: list[set[str]] = []

    # ---------------------------------------------------------------- tokens

    def peek(self, ahead: int = 0) -> Token:
        index = min(self.position + ahead, len(self.tokens) - 1)
        return self.tokens[index]

    def take(self) -> Token:
        token = self.peek()
        self.position = min(self.position + 1, len(self.tokens) - 1)
        return token

    def at(self, *texts: str) -> bool:
        token = self.peek()
        return (token.kind == "symbol" and token.text in texts) or token.upper in texts

    def accept(self, *texts: str) -> bool:
        if self.at(*texts):
            self.take()
            return True
        return False

    def expect(self, text: str) -> None:
        if not self.accept(text):
            raise SqlSyntaxError(f"expected {text!r}, found {self.peek().text!r}")

    def identifier(self) -> str:
        token = self.take()
        if token.kind not in ("word", "word_q"):
            raise SqlSyntaxError(f"expected a name, found {token.text!r}")
        return token.text

    # ----------------------------------------------------------- expressions

    def named(self) -> Expr:
        expr = self.expression()
        if self.accept("AS"):
            if self.accept("("):
                names = [self.identifier()]
                while self.accept(","):
                    names.append(self.identifier())
                self.expect(")")
                return Alias(expr, tuple(names))
            return Alias(expr, (self.identifier(),))
        if self.peek().kind in ("word", "word_q") and self.peek(1).kind == "end":
            return Alias(expr, (self.identifier(),))
        return expr

    def expression(self) -> Expr:
        operands = [self.unary()]
        while True:
            token = self.peek()
            if token.kind == "symbol" and token.text in BINARY_SYMBOLS:
                self.take()
                operands.append(self.unary())
            elif token.upper == "NOT" and (
                self.peek(1).upper in BINARY_WORDS
                or (self.peek(1).upper == "IN" and self.peek(2).text == "(")
            ):
                self.take()
            elif token.upper in BINARY_WORDS:
                self.take()
                if self.at("ANY", "SOME", "ALL") and self.peek(1).text == "(":
                    self.take()
                    operands.extend(self.parenthesised_list())
                else:
                    operands.append(self.unary())
                if self.accept("ESCAPE"):
                    operands.append(self.unary())
            elif token.upper == "IN" and self.peek(1).text == "(":
                self.take()
                operands.extend(self.parenthesised_list())
            elif token.upper == "IS":
                self.take()
                self.accept("NOT")
                if self.accept("DISTINCT"):
                    self.expect("FROM")
                    operands.append(self.unary())
                elif not self.accept("NULL", "TRUE", "FALSE", "UNKNOWN"):
                    raise SqlSyntaxError(f"IS {self.peek().text}")
            else:
                break
        return operands[0] if len(operands) == 1 else Call(OPERATOR, tuple(operands))

    def parenthesised_list(self) -> list[Expr]:
        self.expect("(")
        if self.at("SELECT", "WITH", "FROM", "VALUES", "TABLE"):
            raise _Subquery()
        items = [self.expression()]
        while self.accept(","):
            items.append(self.expression())
        self.expect(")")
        return items

    def unary(self) -> Expr:
        if self.at("-", "+", "~", "!") or self.peek().upper == "NOT":
            self.take()
            return Call(OPERATOR, (self.unary(),))
        if (
            self.peek().upper == "EXISTS"
            and self.peek(1).text == "("
            and self.peek(2).upper in ("SELECT", "WITH", "FROM", "VALUES", "TABLE")
        ):
            raise _Subquery()
        return self.postfix(self.primary())

    def postfix(self, expr: Expr) -> Expr:
        while True:
            if self.accept("["):
                index = self.expression()
                self.expect("]")
                expr = Call(EXTRACT, (expr, index))
            elif self.at(".") and self.peek(1).kind in ("word", "word_q"):
                self.take()
                field = self.identifier()
                if isinstance(expr, Attr) and not expr.niladic:
                    expr = Attr((*expr.parts, field), expr.plan_id)
                else:
                    expr = Call(EXTRACT, (expr,))
            elif self.at(".") and self.peek(1).text == "*" and isinstance(expr, Attr):
                self.take()
                self.take()
                return Star(expr.parts)
            elif self.accept("::"):
                self.skip_type()
                expr = Call(CAST, (expr,))
            elif self.at(":") and self.peek(1).kind in ("word", "word_q", "string"):
                self.take()
                self.take()
                expr = Call(EXTRACT, (expr,))
            else:
                return expr

    def primary(self) -> Expr:
        token = self.peek()
        if token.kind in ("number", "string"):
            self.take()
            while self.peek().kind == "string":
                self.take()
            return Lit()
        if token.kind == "symbol":
            if token.text == "*":
                self.take()
                return Star()
            if token.text == "?":
                self.take()
                return Lit()
            if token.text == ":" and self.peek(1).kind == "word":
                self.take()
                self.take()
                return Lit()
            if token.text == "(":
                return self.parenthesis()
            raise SqlSyntaxError(f"unexpected {token.text!r}")
        if token.kind == "end":
            raise SqlSyntaxError("the text ends too soon")
        word = token.upper
        if token.kind == "word":
            if word in ("TRUE", "FALSE", "NULL"):
                self.take()
                return Lit()
            if word in TYPED_LITERALS and self.peek(1).kind == "string":
                self.take()
                self.take()
                return Lit()
            if word == "INTERVAL":
                return self.interval()
            if word == "CASE":
                return self.case()
            if word in ("CAST", "TRY_CAST") and self.peek(1).text == "(":
                return self.cast()
        if self.peek(1).text == "(":
            return self.function()
        if word in STOPS or word in BINARY_WORDS or word in ("IS", "NOT", "SELECT", "WHERE"):
            raise SqlSyntaxError(f"unexpected {token.text}")
        if self.peek(1).text == "->":
            return self.lambda_function([self.identifier()])
        self.take()
        if any(token.text.lower() in names for names in self.lambda_names):
            return Lit()
        return Attr((token.text,), niladic=token.kind == "word" and word in NILADIC)

    def parenthesis(self) -> Expr:
        # `(x, y) -> body`: a lambda's parameters
        index, names = 1, []
        while self.peek(index).kind in ("word", "word_q"):
            names.append(self.peek(index).text)
            if self.peek(index + 1).text == ",":
                index += 2
                continue
            if self.peek(index + 1).text == ")" and self.peek(index + 2).text == "->":
                self.position += index + 2
                return self.lambda_function(names)
            break
        items = self.parenthesised_list()
        return items[0] if len(items) == 1 else Call(ROW, tuple(items))

    def lambda_function(self, names: list[str]) -> Expr:
        self.expect("->")
        self.lambda_names.append({n.lower() for n in names})
        try:
            body = self.expression()
        finally:
            self.lambda_names.pop()
        return Call(LAMBDA, (body,))

    def interval(self) -> Expr:
        self.take()
        while True:
            token = self.peek()
            if (
                token.kind in ("number", "string")
                or token.upper in INTERVAL_UNITS
                or (token.kind == "symbol" and token.text in ("-", "+"))
            ):
                self.take()
            else:
                return Lit()

    def case(self) -> Expr:
        self.take()
        subject = None if self.at("WHEN") else self.expression()
        args: list[Expr] = []
        while self.accept("WHEN"):
            condition = self.expression()
            if subject is not None:  # CASE x WHEN v: Spark compares x = v in each branch
                condition = Call(OPERATOR, (subject, condition))
            self.expect("THEN")
            args.extend([condition, self.expression()])
        if not args:
            raise SqlSyntaxError("CASE without WHEN")
        if self.accept("ELSE"):
            args.append(self.expression())
        self.expect("END")
        return Call("when", tuple(args))

    def cast(self) -> Expr:
        self.take()
        self.expect("(")
        value = self.expression()
        self.expect("AS")
        self.skip_type()
        self.expect(")")
        return Call(CAST, (value,))

    def skip_type(self) -> None:
        """A data type (`decimal(10, 2)`, `array<struct<a: int>>`, `interval day to second`,
        `string collate utf8_lcase`)."""
        name = self.identifier().upper()
        if name == "INTERVAL":
            while self.peek().upper in INTERVAL_UNITS:
                self.take()
        if self.at("("):
            self.skip_balanced("(", {")": 1})
        if self.at("<") and name in ("ARRAY", "MAP", "STRUCT"):
            self.skip_balanced("<", {">": 1, ">>": 2, ">>>": 3})
        if self.accept("COLLATE"):
            self.identifier()

    def skip_balanced(self, opening: str, closing: dict[str, int]) -> None:
        depth = 0
        while True:
            token = self.take()
            if token.kind == "end":
                raise SqlSyntaxError(f"unbalanced {opening!r}")
            if token.kind == "symbol" and token.text == opening:
                depth += 1
            elif token.kind == "symbol" and token.text in closing:
                depth -= closing[token.text]
                if depth < 0:
                    raise SqlSyntaxError(f"unbalanced {opening!r}")
                if depth == 0:
                    return

    def function(self) -> Expr:
        name = self.identifier().lower()
        self.expect("(")
        args: list[Expr] = []
        if name == "extract":
            self.identifier()  # the field (YEAR, ...)
            self.expect("FROM")
            args.append(self.expression())
        elif name in UNIT_FIRST and self.peek().kind == "word" and self.peek(1).text == ",":
            self.take()
            self.expect(",")
            args.extend(self.arguments())
        elif name in ("trim", "btrim", "ltrim", "rtrim") and self.at("BOTH", "LEADING", "TRAILING"):
            self.take()
            if not self.at("FROM"):
                args.append(self.expression())
            self.expect("FROM")
            args.append(self.expression())
        elif not self.at(")"):
            self.accept("ALL", "DISTINCT")  # a distinct aggregate aggregates its arguments
            args.extend(self.arguments())
            while self.at("FROM", "FOR", "IN", "PLACING"):  # substring(a FROM 1 FOR 2), ...
                self.take()
                args.append(self.expression())
        self.expect(")")
        if self.at("WITHIN") and self.peek(1).upper == "GROUP":
            self.take()
            self.take()
            self.expect("(")
            self.expect("ORDER")
            self.expect("BY")
            args.extend(self.sort_items())
            self.expect(")")
        if self.at("FILTER") and self.peek(1).text == "(":
            self.take()
            self.take()
            self.expect("WHERE")
            args.append(self.expression())
            self.expect(")")
        if self.at("IGNORE", "RESPECT"):
            self.take()
            self.expect("NULLS")
        call: Expr = Call(name, tuple(args))
        if self.accept("OVER"):
            call = self.window(call)
        return call

    def arguments(self) -> list[Expr]:
        found = [self.argument()]
        while self.accept(","):
            found.append(self.argument())
        return found

    def argument(self) -> Expr:
        if self.peek().kind in ("word", "word_q") and self.peek(1).text == "=>":
            self.take()
            self.take()
        return self.expression()

    def sort_items(self) -> list[Expr]:
        items = []
        while True:
            items.append(self.expression())
            self.accept("ASC", "DESC")
            if self.accept("NULLS") and not self.accept("FIRST", "LAST"):
                raise SqlSyntaxError("NULLS without FIRST or LAST")
            if not self.accept(","):
                return items

    def window(self, function: Expr) -> Expr:
        if not self.accept("("):
            raise SqlSyntaxError("a named window")
        partition: list[Expr] = []
        order: list[Expr] = []
        frame: list[Expr] = []
        while not self.at(")"):
            if self.at("PARTITION", "DISTRIBUTE", "CLUSTER"):
                self.take()
                self.expect("BY")
                partition.extend(self.arguments())
            elif self.at("ORDER", "SORT"):
                self.take()
                self.expect("BY")
                order.extend(self.sort_items())
            elif self.at("ROWS", "RANGE"):
                self.take()
                between = self.accept("BETWEEN")
                frame.extend(self.frame_bound())
                if between:
                    self.expect("AND")
                    frame.extend(self.frame_bound())
            else:
                raise SqlSyntaxError(f"unexpected {self.peek().text!r} in OVER")
        self.expect(")")
        return Over(function, tuple(partition), tuple(order), tuple(frame))

    def frame_bound(self) -> list[Expr]:
        if self.accept("UNBOUNDED"):
            if not self.accept("PRECEDING", "FOLLOWING"):
                raise SqlSyntaxError("UNBOUNDED without PRECEDING or FOLLOWING")
            return []
        if self.accept("CURRENT"):
            self.expect("ROW")
            return []
        value = self.unary()
        if not self.accept("PRECEDING", "FOLLOWING"):
            raise SqlSyntaxError("a frame bound without PRECEDING or FOLLOWING")
        return [value]


class _Subquery(Exception):
    pass


def parse_expression(text: str) -> Expr:
    """SQL expression text (`"fare * 2 AS f2"`) as an `Expr`; `Opaque` where this parser does
    not follow it."""
    try:
        parser = _Parser(text)
        expr = parser.named()
        if parser.peek().kind != "end":
            raise SqlSyntaxError(f"unexpected {parser.peek().text!r}")
        return expr
    except _Subquery:
        return Opaque("a subquery in SQL text")
    except SqlSyntaxError as exc:
        return Opaque(f"SQL text this parser does not follow ({exc})")
